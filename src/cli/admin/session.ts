/**
 * login, logout, whoami: keeping a token in the config file (0600) instead of the environment.
 * login reads the token from stdin (hidden on a terminal), never from the command line, and checks
 * it against the server before writing anything.
 */
import type { Command } from 'commander';
import { readAll } from './arguments.js';
import { createApi } from './client.js';
import { AdminError, EXIT } from './exit-codes.js';
import { renderFields } from './output.js';
import type { AdminIo, Ctx, Register } from './command-context.js';
import {
  checkServerUrl,
  configPathOf,
  DEFAULT_SERVER,
  ENV,
  readConfigFile,
  writeConfigFile,
  type ConfigFile,
} from './settings.js';

const ME = 'query Me { me { username isAdmin } }';

/** Reads one line from a terminal without echoing it. */
function readHidden(io: AdminIo, prompt: string): Promise<string> {
  const { stdin } = io;
  io.stderr.write(prompt);
  return new Promise((resolve, reject) => {
    let value = '';
    stdin.setRawMode?.(true);
    stdin.resume();
    const done = (err: Error | null) => {
      stdin.setRawMode?.(false);
      stdin.pause();
      stdin.off('data', onData);
      io.stderr.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: Buffer | string) => {
      for (const ch of chunk.toString()) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return done(null);
        if (ch === '\u0003') return done(new AdminError('cancelled', EXIT.usage));
        if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
        else value += ch;
      }
    };
    stdin.on('data', onData);
  });
}

/** The config file as it is, or nothing when it cannot be used (login replaces it). */
function existingConfig(file: string): ConfigFile {
  try {
    return readConfigFile(file) ?? {};
  } catch {
    return {};
  }
}

async function login(ctx: Ctx): Promise<void> {
  const { io, flags, out } = ctx;
  const file = configPathOf(flags.config, io.env);
  const old = existingConfig(file);
  const server = checkServerUrl(flags.server ?? io.env[ENV.server] ?? old.server ?? DEFAULT_SERVER, '--server');
  const raw = io.stdin.isTTY ? await readHidden(io, `Token for ${server} (not shown): `) : await readAll(io.stdin);
  const token = raw.trim();
  if (!token)
    throw new AdminError(
      'no token given: type it, or give it on stdin (tagsched-admin login < token-file)',
      EXIT.usage,
    );
  if (/\s/.test(token)) throw new AdminError('the token must be one word (stdin held more than a token)', EXIT.usage);
  const api = createApi(
    { serverUrl: server, token, tokenSource: 'stdin', configPath: file },
    { timeoutMs: Number(flags.timeout) * 1000, fetch: io.fetch },
  );
  const data = await api.query<{ me: { username: string; isAdmin: boolean } | null }>(ME);
  if (!data.me)
    throw new AdminError(
      'this is not a user token (a worker or activation token): tagsched-admin acts as a user',
      EXIT.auth,
    );
  writeConfigFile(file, { server, token });
  if (out.json) return out.writeJson(data);
  out.line(
    `Logged in to ${server} as ${data.me.username}${data.me.isAdmin ? ' (admin)' : ''}; the token is kept in ${file} (mode 0600).`,
  );
}

async function logout(ctx: Ctx, opts: { revoke?: boolean }): Promise<void> {
  const { io, flags, out } = ctx;
  const file = configPathOf(flags.config, io.env);
  const config = readConfigFile(file);
  if (!config?.token) {
    out.line(`Not logged in: ${file} holds no token.`);
    return;
  }
  if (opts.revoke) {
    const api = ctx.api();
    if (api.connection.tokenSource !== file)
      throw new AdminError(
        `--revoke revokes the token of ${file}, but ${ENV.token} is set: unset it first`,
        EXIT.usage,
      );
    await api.mutate(
      'mutation Revoke { revokeToken(input: {}) { __typename ... on Error { code message } } }',
      {},
      'revokeToken',
    );
  }
  writeConfigFile(file, { server: config.server });
  out.line(`Logged out: the token was removed from ${file}${opts.revoke ? ' and revoked on the server' : ''}.`);
}

async function whoami(ctx: Ctx): Promise<void> {
  const api = ctx.api();
  const data = await api.query<{ me: { username: string; isAdmin: boolean } | null }>(ME);
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { connection } = api;
  ctx.out.write(
    renderFields(ctx.out, [
      ['Server', connection.serverUrl],
      ['User', data.me ? data.me.username : connection.token ? '(not a user token)' : '(anonymous: no token)'],
      ['Admin', data.me ? (data.me.isAdmin ? 'yes' : 'no') : '-'],
      ['Token from', connection.tokenSource ?? '-'],
    ]),
  );
}

export const registerSessionCommands: Register = (program: Command, action) => {
  action(
    program
      .command('login')
      .description('Checks a token with the server and keeps it, with the server URL, in the config file (mode 0600)')
      .addHelpText(
        'after',
        `
The token is read from stdin: typed (not shown) on a terminal, or from a file or a pipe.
A config file that other users may read is replaced.

Examples:
  tagsched-admin --server https://ci.example.org/graphql login
  tagsched-admin login < ~/secrets/tagsched-token`,
      ),
    (ctx) => login(ctx),
  );
  action(
    program
      .command('logout')
      .description('Removes the token from the config file')
      .option('--revoke', 'also revoke the token on the server')
      .addHelpText('after', '\nExamples:\n  tagsched-admin logout --revoke'),
    (ctx, _a, opts) => logout(ctx, opts),
  );
  action(
    program
      .command('whoami')
      .description('Shows the server, the user of the token and where the token comes from (never the token)')
      .addHelpText('after', '\nExamples:\n  tagsched-admin whoami'),
    (ctx) => whoami(ctx),
  );
};
