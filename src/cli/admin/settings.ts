/**
 * Where tagsched-admin connects and with which token: the one place that reads its environment
 * variables and its config file. The token comes from TAGSCHED_TOKEN or the config file, never from
 * a flag (a command line is visible to every user of the machine in `ps`). The config file is
 * refused when other users could read or write it, as ssh refuses a private key.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AdminError, EXIT, usageError } from './exit-codes.js';

/** The environment variables tagsched-admin reads. */
export const ENV = {
  server: 'TAGSCHED_SERVER_URL',
  token: 'TAGSCHED_TOKEN',
  config: 'TAGSCHED_ADMIN_CONFIG',
  noColor: 'NO_COLOR',
} as const;

export const DEFAULT_SERVER = 'http://127.0.0.1:4000/graphql';

/** What the config file holds (both keys optional). */
export interface ConfigFile {
  server?: string;
  token?: string;
}

/** The connection a command uses; `tokenSource` says where the token came from, for messages. */
export interface Connection {
  readonly serverUrl: string;
  readonly token: string | null;
  readonly tokenSource: string | null;
  readonly configPath: string;
}

/** The config file's default place: $XDG_CONFIG_HOME/tagsched/admin.json, else ~/.config/tagsched/admin.json. */
export function defaultConfigPath(env: NodeJS.ProcessEnv): string {
  const base =
    env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME)
      ? env.XDG_CONFIG_HOME
      : path.join(env.HOME || os.homedir(), '.config');
  return path.join(base, 'tagsched', 'admin.json');
}

/** The config file named by --config, TAGSCHED_ADMIN_CONFIG or the default place. */
export function configPathOf(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return path.resolve(flag || env[ENV.config] || defaultConfigPath(env));
}

/** Reads the config file; null when it does not exist. Refuses one other users may read or write. */
export function readConfigFile(file: string): ConfigFile | null {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new AdminError(`cannot read the config file ${file}: ${(err as Error).message}`, EXIT.config);
  }
  if (!stat.isFile()) throw new AdminError(`the config file ${file} is not a file`, EXIT.config);
  if ((stat.mode & 0o077) !== 0) {
    throw new AdminError(
      `the config file ${file} may be read or written by other users (mode ${(stat.mode & 0o777).toString(8)}): it holds a token`,
      EXIT.config,
      null,
      [`run: chmod 600 ${file}`],
    );
  }
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid) {
    throw new AdminError(`the config file ${file} belongs to another user (uid ${stat.uid})`, EXIT.config);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new AdminError(`the config file ${file} is not JSON: ${(err as Error).message}`, EXIT.config);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new AdminError(`the config file ${file} must hold a JSON object`, EXIT.config);
  const { server, token } = parsed as Record<string, unknown>;
  if (server !== undefined && typeof server !== 'string')
    throw new AdminError(`the config file ${file}: "server" must be a string`, EXIT.config);
  if (token !== undefined && typeof token !== 'string')
    throw new AdminError(`the config file ${file}: "token" must be a string`, EXIT.config);
  return { server, token };
}

/**
 * Writes the config file with mode 0600 (its directory 0700 when created), through a temporary file
 * renamed over it, so that the token is never in a file others can read, even for an instant.
 */
export function writeConfigFile(file: string, content: ConfigFile): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, `${JSON.stringify(content, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  try {
    fs.chmodSync(temporary, 0o600); // whatever the umask did
    fs.renameSync(temporary, file);
  } catch (err) {
    fs.rmSync(temporary, { force: true });
    throw err;
  }
}

/** Checks a server URL: http(s), with a path (usually /graphql). */
export function checkServerUrl(url: string, where: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usageError(`${where} is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw usageError(`${where} must be an http:// or https:// URL, got ${JSON.stringify(url)}`);
  if (parsed.username || parsed.password)
    throw usageError(`${where} must not carry a user or password; the token goes in ${ENV.token} or the config file`);
  return parsed.toString();
}

/** The connection from the flags, the environment and the config file (in that order of precedence). */
export function resolveConnection(flags: { server?: string; config?: string }, env: NodeJS.ProcessEnv): Connection {
  const configPath = configPathOf(flags.config, env);
  const file = readConfigFile(configPath);
  const [serverUrl, where] = flags.server
    ? [flags.server, '--server']
    : env[ENV.server]
      ? [env[ENV.server]!, ENV.server]
      : file?.server
        ? [file.server, `"server" in ${configPath}`]
        : [DEFAULT_SERVER, 'the default server'];
  const envToken = env[ENV.token]?.trim();
  const [token, tokenSource] = envToken ? [envToken, ENV.token] : file?.token ? [file.token, configPath] : [null, null];
  return { serverUrl: checkServerUrl(serverUrl, where), token, tokenSource, configPath };
}
