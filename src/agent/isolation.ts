/**
 * How a handler is kept from acting as its worker: it must not read the agent's token, neither in
 * the state file nor in the agent's process (its environment, its command line, its memory).
 *
 * - `user`: the agent runs as root and runs each handler as another, unprivileged user
 *   (`--handler-user`), in new mount and PID namespaces where they can be made: the state file's
 *   directory is covered by an empty tmpfs and the agent's processes are not in the handler's /proc.
 *   The handler user cannot read the root-owned state file or root's /proc entries anyway.
 * - `namespace`: the agent is not root; each handler runs in new user, mount and PID namespaces
 *   (unshare(1) from util-linux), as the agent's own uid mapped in a user namespace nested in the
 *   one that set up the mounts, so that it holds no capability over them: the tmpfs over the state
 *   file's directory cannot be unmounted, and the agent is not in its /proc.
 *   `--handler-isolation namespace` asks for this mode whatever the agent's user (root included: the
 *   local provider's agents, whose handlers run as the server's user), and the agent does not start
 *   where it cannot be made.
 * - `none`: neither is possible (or `--handler-isolation none`): a handler can read the token. The
 *   agent says so at start, as a warning in its log, and on every start of a handler at debug level.
 *
 * The hidden directory is the state file's own, or `--hidden-dir`, which must hold the state file.
 *
 * The handler's environment never holds the tokens in any mode (runner.ts removes them).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** What `--handler-isolation` may say. */
export const ISOLATION_CHOICES = ['auto', 'none', 'namespace'] as const;
export type IsolationChoice = (typeof ISOLATION_CHOICES)[number];

/** An account handlers run as. */
export interface HandlerAccount {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** How handlers are run; `hide` is the directory covered by an empty tmpfs in the handler's mount namespace. */
export type Isolation =
  | { kind: 'user'; account: HandlerAccount; namespaces: boolean; hide: string | null }
  | { kind: 'namespace'; uid: number; gid: number; hide: string | null }
  | { kind: 'none'; why: string };

/** What the plan depends on; main.ts passes the process's own, tests their own. */
export interface IsolationInputs {
  choice: IsolationChoice;
  /** `--handler-user`, or null. */
  handlerUser: string | null;
  stateFile: string;
  /** `--hidden-dir`: the directory hidden from handlers instead of the state file's; null or absent for that one. */
  hiddenDir?: string | null;
  uid: number;
  gid: number;
}

/** The account of a user name (or numeric uid), from the passwd database; null when it has none. */
export function lookupAccount(user: string): HandlerAccount | null {
  const answer = spawnSync('getent', ['passwd', user], { encoding: 'utf8', timeout: 10_000 });
  if (answer.status !== 0) return null;
  const fields = answer.stdout.split('\n')[0].split(':');
  if (fields.length < 7) return null;
  const uid = Number(fields[2]);
  const gid = Number(fields[3]);
  if (!Number.isSafeInteger(uid) || !Number.isSafeInteger(gid)) return null;
  return { name: fields[0], uid, gid, home: fields[5] || '/' };
}

/**
 * The directory to cover in the handler's mount namespace: the state file's own. Never `/`, which
 * would cover everything (a state file at the root is then not hidden: `none` would not say so, so
 * the caller treats it as a reason, see planIsolation).
 */
export function hiddenDirOf(stateFile: string): string | null {
  const dir = path.dirname(path.resolve(stateFile));
  return dir === path.parse(dir).root ? null : dir;
}

/** The directory to cover: `hiddenDir` when given (it must hold the state file, and not be `/`), else the state file's own. */
export function hiddenDirFor(stateFile: string, hiddenDir: string | null | undefined): string | null {
  if (!hiddenDir) return hiddenDirOf(stateFile);
  const dir = path.resolve(hiddenDir);
  const inside = path.relative(dir, path.resolve(stateFile));
  if (dir === path.parse(dir).root || inside.startsWith('..') || path.isAbsolute(inside)) {
    throw new IsolationError(
      `--hidden-dir (TAGSCHED_HIDDEN_DIR) ${dir} must be a directory below / that holds the state file ${stateFile}`,
    );
  }
  return dir;
}

/** The command line that opens the namespaces; see runner.ts for what runs inside. */
export function namespacePrefix(isolation: Isolation): string[] {
  if (isolation.kind === 'none' || (isolation.kind === 'user' && !isolation.namespaces)) return [];
  const user = isolation.kind === 'namespace' ? ['--user', '--map-root-user'] : [];
  return ['unshare', ...user, '--mount', '--pid', '--fork', '--mount-proc', '--propagation', 'private', '--'];
}

/** The command that drops to the handler's identity, before the handler's shell. */
export function dropPrefix(isolation: Isolation): string[] {
  if (isolation.kind === 'user') {
    const { uid, gid } = isolation.account;
    return ['setpriv', `--reuid=${uid}`, `--regid=${gid}`, '--init-groups', '--inh-caps=-all', '--'];
  }
  if (isolation.kind === 'namespace')
    return ['unshare', '--user', `--map-user=${isolation.uid}`, `--map-group=${isolation.gid}`, '--'];
  return [];
}

/** Whether namespaces of this kind can be made here: a trial run of the same wrapper, with `true` as the handler. */
function namespacesWork(isolation: Isolation): boolean {
  const probeDir = fs.mkdtempSync(path.join(fs.realpathSync(process.env.TMPDIR ?? '/tmp'), 'tagsched-probe-'));
  try {
    if (isolation.kind === 'user') fs.chmodSync(probeDir, 0o755);
    const trial = spawnSync(
      namespacePrefix(isolation)[0],
      [
        ...namespacePrefix(isolation).slice(1),
        '/bin/sh',
        '-c',
        'cd "$1" && shift && exec "$@"',
        'probe',
        probeDir,
        ...dropPrefix(isolation),
        'true',
      ],
      {
        stdio: 'ignore',
        timeout: 10_000,
      },
    );
    return trial.status === 0;
  } catch {
    return false;
  } finally {
    fs.rmSync(probeDir, { recursive: true, force: true });
  }
}

/** Whether setpriv can switch to the account (it is on PATH and the agent is root). */
function setprivWorks(account: HandlerAccount): boolean {
  const trial = spawnSync(
    'setpriv',
    [`--reuid=${account.uid}`, `--regid=${account.gid}`, '--init-groups', '--', 'true'],
    { stdio: 'ignore', timeout: 10_000 },
  );
  return trial.status === 0;
}

/** A usage problem with --handler-user or --handler-isolation: the agent does not start. */
export class IsolationError extends Error {
  override readonly name = 'IsolationError';
}

/** Decides how handlers run here, trying what it would use. */
export function planIsolation(inputs: IsolationInputs): Isolation {
  if (inputs.choice === 'none')
    return { kind: 'none', why: 'turned off by --handler-isolation none (TAGSCHED_HANDLER_ISOLATION)' };
  const hide = hiddenDirFor(inputs.stateFile, inputs.hiddenDir);
  if (inputs.choice === 'namespace') {
    if (inputs.handlerUser !== null)
      throw new IsolationError(
        "--handler-isolation namespace runs handlers as the agent's own user: --handler-user needs auto",
      );
    if (hide === null)
      throw new IsolationError(
        `--handler-isolation namespace: the state file ${inputs.stateFile} is at the root of the file system, which cannot be hidden`,
      );
    const isolation: Isolation = { kind: 'namespace', uid: inputs.uid, gid: inputs.gid, hide };
    if (namespacesWork(isolation)) return isolation;
    throw new IsolationError(
      '--handler-isolation namespace: user, mount and PID namespaces cannot be made here (is util-linux installed, are user namespaces allowed?)',
    );
  }
  if (inputs.uid === 0) {
    if (inputs.handlerUser === null) {
      return {
        kind: 'none',
        why: 'the agent runs as root and no --handler-user (TAGSCHED_HANDLER_USER) is given: handlers run as root',
      };
    }
    const account = lookupAccount(inputs.handlerUser);
    if (!account)
      throw new IsolationError(
        `--handler-user (TAGSCHED_HANDLER_USER): no user ${JSON.stringify(inputs.handlerUser)} on this machine`,
      );
    if (account.uid === 0)
      throw new IsolationError(
        '--handler-user (TAGSCHED_HANDLER_USER) must not be root: the handler could read the worker token',
      );
    if (!setprivWorks(account))
      throw new IsolationError(
        `--handler-user: setpriv cannot switch to ${account.name} (is util-linux's setpriv installed?)`,
      );
    const withNamespaces: Isolation = { kind: 'user', account, namespaces: true, hide };
    return namespacesWork(withNamespaces) ? withNamespaces : { kind: 'user', account, namespaces: false, hide: null };
  }
  if (inputs.handlerUser !== null)
    throw new IsolationError('--handler-user (TAGSCHED_HANDLER_USER) needs the agent to run as root');
  if (hide === null)
    return {
      kind: 'none',
      why: `the state file ${inputs.stateFile} is at the root of the file system, which cannot be hidden`,
    };
  const isolation: Isolation = { kind: 'namespace', uid: inputs.uid, gid: inputs.gid, hide };
  if (namespacesWork(isolation)) return isolation;
  return {
    kind: 'none',
    why: 'unprivileged user namespaces cannot be made here (unshare --user --map-root-user failed; is util-linux installed, are user namespaces allowed?)',
  };
}

/** A line for the log: how handlers run. */
export function describeIsolation(isolation: Isolation): Record<string, unknown> {
  if (isolation.kind === 'user')
    return {
      isolation: 'user',
      handlerUser: isolation.account.name,
      namespaces: isolation.namespaces,
      hidden: isolation.hide,
    };
  if (isolation.kind === 'namespace') return { isolation: 'namespace', hidden: isolation.hide };
  return { isolation: 'none', why: isolation.why };
}
