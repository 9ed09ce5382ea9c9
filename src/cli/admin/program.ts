/**
 * tagsched-admin's command line: the global options, the command groups (one file each), and
 * runAdmin(), the entry that both the executable and the tests call. Every command reaches the
 * server through one Api made from the resolved connection; every failure is an AdminError, printed
 * as one line on stderr (plus detail lines) and turned into its exit code.
 */
import { Command, CommanderError, Option } from 'commander';
import packageJson from '../../../package.json' with { type: 'json' };
import { createApi, TypedErrorResult, type Api } from './client.js';
import { AdminError, EXIT, exitCodeTable } from './exit-codes.js';
import { terminalSafe, terminalSafeDeep } from './terminal-text.js';
import { createOutput } from './output.js';
import type { ActionFn, AdminIo, Ctx, GlobalFlags } from './command-context.js';
import { ENV, resolveConnection, type Connection } from './settings.js';
import { registerDemandCommands } from './demand.js';
import { registerEnvironmentCommands } from './environments.js';
import { registerGroupCommands } from './groups.js';
import { registerImageCommands } from './images.js';
import { registerInstanceCommands } from './instances.js';
import { registerPoolCommands } from './pools.js';
import { registerReplicaCommands } from './replicas.js';
import { registerRuleCommands } from './rules.js';
import { registerSessionCommands } from './session.js';
import { registerTaskCommands } from './tasks.js';
import { registerTokenCommands } from './tokens.js';
import { registerWorkCommands } from './work.js';
import { registerWorkerCommands } from './workers.js';
import { registerWorkspaceCommands } from './workspaces.js';

// Imported rather than read at run time, so that a bundled tagsched-admin carries it.
const { version } = packageJson;

const ROOT_HELP = `
Connection:
  The server is --server, else ${ENV.server}, else "server" in the config file, else
  http://127.0.0.1:4000/graphql. The token is ${ENV.token}, else "token" in the config file
  (--config, else ${ENV.config}, else $XDG_CONFIG_HOME/tagsched/admin.json, i.e.
  ~/.config/tagsched/admin.json). The token is never taken from a flag: command lines are visible
  to every user of the machine. \`tagsched-admin login\` writes the config file with mode 0600; a
  config file other users may read or write is refused.

Output:
  Tables for people (fit to the terminal, colour unless ${ENV.noColor} is set or --no-color);
  --json prints the GraphQL data as the server answered it, for scripts.

Exit codes:
${exitCodeTable()
  .map(([code, text]) => `  ${String(code).padStart(2)}  ${text}`)
  .join('\n')}

Examples:
  tagsched-admin login                       # asks for the token, checks it, keeps it in the config file
  tagsched-admin worker list --status IDLE
  tagsched-admin work why 42
  tagsched-admin demand --watch 5
  ${ENV.token}="$(cat /etc/tagsched/admin-token)" tagsched-admin demand --json | jq '.provisioningDemand.pools[]'
`;

/**
 * The whole command line, writing to `io`; `parseAsync` then runs the command. `token()` is the
 * token of the connection once a command has resolved it, so that no message can show it.
 */
export function buildProgram(io: AdminIo): { program: Command; token: () => string | null } {
  const program = new Command('tagsched-admin')
    .description(
      'Administers a tagsched server over its GraphQL API: users, tokens, workspaces, workers, pools, demand and work.',
    )
    .version(version, '-V, --version')
    .addOption(
      new Option(
        '--server <url>',
        `the GraphQL endpoint (default: ${ENV.server}, the config file, http://127.0.0.1:4000/graphql)`,
      ),
    )
    .addOption(
      new Option('--config <file>', `the config file (default: ${ENV.config}, $XDG_CONFIG_HOME/tagsched/admin.json)`),
    )
    .option('--json', 'print the GraphQL data as JSON, for scripts')
    .option('--no-color', 'no colour, even on a terminal')
    .option('--timeout <seconds>', 'give up on a request after this long', '30')
    .showHelpAfterError('(add --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => void io.stdout.write(s),
      writeErr: (s) => void io.stderr.write(s),
      getOutHelpWidth: () => (io.stdout.isTTY ? (io.stdout.columns ?? 80) : 100),
      getErrHelpWidth: () => 100,
      outputError: (s, write) => write(s.replace(/^error: /, 'tagsched-admin: ')),
    })
    .addHelpText('after', ROOT_HELP);

  let api: Api | null = null;
  let connection: Connection | null = null;
  const ctxOf = (command: Command): Ctx => {
    const flags = command.optsWithGlobals<GlobalFlags>();
    const out = createOutput(io.stdout, {
      json: flags.json === true,
      isTTY: io.stdout.isTTY === true,
      columns: io.stdout.columns,
      noColor: !flags.color || ENV.noColor in io.env,
    });
    const ctx: Ctx = {
      io,
      out,
      flags,
      connection: () => (connection ??= resolveConnection(flags, io.env)),
      api: (options = {}) => {
        const seconds = Number(flags.timeout);
        if (!(seconds > 0))
          throw new AdminError(
            `--timeout must be a positive number of seconds, got ${JSON.stringify(flags.timeout)}`,
            EXIT.usage,
          );
        api ??= createApi(ctx.connection(), { timeoutMs: seconds * 1000, fetch: io.fetch });
        return out.json || options.raw ? api : terminalSafeApi(api);
      },
    };
    return ctx;
  };
  const action = (command: Command, fn: ActionFn): Command =>
    command.action(async (...all: unknown[]) => {
      const self = all[all.length - 1] as Command;
      const opts = all[all.length - 2] as Record<string, any>;
      await fn(ctxOf(self), all.slice(0, -2) as string[], opts);
    });

  registerSessionCommands(program, action);
  registerTokenCommands(program, action);
  registerWorkspaceCommands(program, action);
  registerRuleCommands(program, action);
  registerGroupCommands(program, action);
  registerEnvironmentCommands(program, action);
  registerWorkerCommands(program, action);
  registerImageCommands(program, action);
  registerPoolCommands(program, action);
  registerInstanceCommands(program, action);
  registerDemandCommands(program, action);
  registerTaskCommands(program, action);
  registerWorkCommands(program, action);
  registerReplicaCommands(program, action);
  return { program, token: () => connection?.token ?? null };
}

/** The same client, answering terminal-safe data (errors are made safe where they are printed). */
function terminalSafeApi(api: Api): Api {
  return {
    connection: api.connection,
    query: async (document, variables) => terminalSafeDeep(await api.query(document, variables)),
    mutate: async (document, variables, field) => terminalSafeDeep(await api.mutate(document, variables, field)),
    subscribe: (document, variables, onData, signal) =>
      api.subscribe(document, variables, (data) => onData(terminalSafeDeep(data)), signal),
  };
}

/** Replaces the token wherever it might appear in a message (it should not; this makes sure). */
function redact(text: string, token: string | null): string {
  return token ? text.split(token).join('[token]') : text;
}

/** Runs tagsched-admin with `argv` (the arguments after the program name); resolves to the exit code. */
export async function runAdmin(argv: readonly string[], io: AdminIo): Promise<number> {
  const { program, token: connectionToken } = buildProgram(io);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // commander has printed the help, the version or what is wrong with the command line.
      return err.exitCode === 0 || err.code === 'commander.helpDisplayed' || err.code === 'commander.version'
        ? EXIT.ok
        : EXIT.usage;
    }
    const token = connectionToken() ?? io.env[ENV.token] ?? null;
    if (err instanceof AdminError) {
      if (err instanceof TypedErrorResult && program.opts<GlobalFlags>().json)
        io.stdout.write(`${JSON.stringify(err.data, null, 2)}\n`);
      const code = err.code ? ` [${err.code}]` : '';
      io.stderr.write(
        redact(
          terminalSafe(`tagsched-admin: ${err.message}${code}\n${err.details.map((d) => `  ${d}\n`).join('')}`),
          token,
        ),
      );
      return err.exitCode;
    }
    io.stderr.write(
      redact(
        `tagsched-admin: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
        token,
      ),
    );
    return EXIT.generic;
  }
}
