/**
 * Runs one task through its handler command: `/bin/sh` in a fresh directory, the task as JSON on
 * stdin, output to a log file the agent never reads, and the exit status mapped to the work
 * request's result. A handler does not outlive the agent. The handler runs as isolation.ts
 * decides (another user, namespaces), under a monitor shell that waits for it and reports its CPU
 * time, in its own memory cgroup where cgroup.ts found one, while measure.ts samples what it uses.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { createLeaf, JOIN_SHELL, LEAF_PREFIX, type Leaf, type MemoryCgroup } from './cgroup.js';
import { dropPrefix, namespacePrefix, type Isolation } from './isolation.js';
import { startMeasurement, type RunUsage } from './measure.js';

/** The server's WorkRequestResult values the agent reports. */
export const RESULTS = { success: 'SUCCESS', failure: 'FAILURE', error: 'ERROR' } as const;
export type TaskResult = (typeof RESULTS)[keyof typeof RESULTS];

/** How a handler ended. */
export type Outcome =
  | { kind: 'exit'; code: number }
  | { kind: 'signal'; signal: string }
  /** It never ran: the directory, the log file or the process could not be made. */
  | { kind: 'not-started'; error: string };

/** Exit 0 → SUCCESS, exit 1 → FAILURE (the task ran and said no), anything else → ERROR. */
export function resultOf(outcome: Outcome): TaskResult {
  if (outcome.kind !== 'exit') return RESULTS.error;
  if (outcome.code === 0) return RESULTS.success;
  if (outcome.code === 1) return RESULTS.failure;
  return RESULTS.error;
}

/** The task as the handler receives it on stdin. */
export interface Task {
  id: string;
  taskType: string;
  taskName: string;
  taskData: unknown;
}

/** What one run needs. */
export interface RunSpec {
  task: Task;
  command: string;
  /** `<work-dir>/runs`; the run gets its own directory inside. */
  runsDir: string;
  /** TAGSCHED_PARALLEL. */
  parallel: number;
  /** The environment the handler inherits (the agent's own, without its tokens). */
  env: NodeJS.ProcessEnv;
  /** How the handler is kept from the agent's token; none when absent. */
  isolation?: Isolation;
  /** Where the run's memory cgroup is made; none when absent (the process tree is measured). */
  memoryCgroup?: MemoryCgroup;
  /** The memory limit of the run's cgroup, in bytes (run-limits.ts); none when null or absent, or without a cgroup. */
  memoryLimitBytes?: number | null;
  /** The CPU weight of the run's cgroup (run-limits.ts), where it has the cpu controller; the default when null or absent. */
  cpuWeight?: number | null;
}

/** A started handler. */
export interface Run {
  readonly pid: number | undefined;
  readonly dir: string;
  readonly logFile: string;
  /** Settles when the handler has exited; never rejects. */
  readonly done: Promise<Outcome>;
  /** What the run used; settles after `done`, never rejects. */
  readonly usage: Promise<RunUsage | null>;
  /** Signals the handler's whole process group (it runs in its own, see startRun). */
  kill(signal: NodeJS.Signals): void;
}

/** Where in its directory a handler may write why it failed (TAGSCHED_REASON_FILE). */
export const REASON_FILE = 'reason';

/** Environment variables the agent may hold that a handler must not see. */
export const SECRET_ENV = ['TAGSCHED_WORKER_TOKEN', 'TAGSCHED_ACTIVATION_TOKEN'] as const;

/** A directory name for a work request id: ids are the server's, but never become `..` or a path. */
export function runDirName(id: string): string {
  const safe = id.replace(/[^A-Za-z0-9_-]/g, '_');
  return safe === id ? id : `${safe}-${Buffer.from(id).toString('hex').slice(0, 16)}`;
}

/**
 * The name of a run's cgroup: the agent's pid in it keeps apart two agents that share a cgroup (and
 * may be given the same ids by two servers); see cgroup.ts for the leaves of agents that are gone.
 */
export function cgroupLeafName(id: string): string {
  return `${LEAF_PREFIX}${process.pid}-${runDirName(id)}`;
}

/**
 * The shell around a handler's command. Fd 3 is a pipe from the agent that never carries data:
 * end of file means the agent closed it (the handler is done) or died (SIGKILL, crash), and the
 * watchdog then ends the whole process group, so that a killed agent leaves no build running
 * whose result nobody will report (the server re-queues it) and no stray background process.
 * The command itself runs as with `sh -c` (eval in the same shell: `exit N` is its exit status).
 */
const HANDLER_SHELL = [
  // Started from a subshell that exits at once, the watchdog is no job of this shell: a `wait` in
  // the command does not wait for it. It stays in the process group.
  '( ( while read -r _; do :; done <&3; kill -TERM 0 ) & )',
  'exec 3<&-',
  'command=$1; shift',
  'eval "$command"',
].join('\n');

/**
 * The monitor: the first process of the run (PID 1 of the handler's PID namespace when there is
 * one). It covers the hidden directory with an empty tmpfs (`$1`, empty for none) and binds the run
 * directory (`$2`) back over it when it lies inside, then runs the handler (the rest of the
 * arguments) as its child and waits for it: a PID 1 ignores signals it has no handler for, so it
 * passes SIGTERM on. When the handler has ended, it writes `times` (its children's CPU time, the
 * whole tree's as far as it was waited for) on fd 4, which the handler does not inherit, and exits
 * with the handler's status. 125: the namespace could not be set up.
 */
const MONITOR_SHELL = [
  'hide=$1 run=$2; shift 2',
  'if [ -n "$hide" ]; then',
  '  exec 5<"$run" || exit 125',
  '  mount -t tmpfs -o mode=0755,size=64k tagsched-hidden "$hide" || exit 125',
  '  case "$run/" in "$hide"/*) { mkdir -p "$run" && mount --no-canonicalize --bind /proc/self/fd/5 "$run"; } || exit 125;; esac',
  '  exec 5<&-',
  '  cd "$run" || exit 125',
  'fi',
  'trap \'kill -TERM "$child" 2>/dev/null\' TERM HUP',
  // An asynchronous command's stdin is /dev/null before its redirections: the task goes through fd 6.
  'exec 6<&0',
  '"$@" <&6 6<&- 4>&- &',
  'child=$!',
  'exec 6<&- 0</dev/null',
  'wait "$child"; status=$?',
  'while [ "$status" -gt 128 ] && kill -0 "$child" 2>/dev/null; do wait "$child"; status=$?; done',
  'times >&4 2>/dev/null',
  'exit "$status"',
].join('\n');

/** The signal numbers of the signals the agent sends (a monitor reports a handler they ended as 128 + the number). */
const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGTERM: 15, SIGKILL: 9, SIGINT: 2, SIGHUP: 1 };

/**
 * Starts the handler. The directory is emptied first (a request re-run after a restart starts
 * clean). The handler gets its own process group, so a Ctrl-C at the agent's terminal drains
 * the agent instead of killing the build, and a kill reaches the handler's children too.
 */
export function startRun(spec: RunSpec): Run {
  const dir = path.join(spec.runsDir, runDirName(spec.task.id));
  const logFile = path.join(dir, 'log');
  const isolation: Isolation = spec.isolation ?? { kind: 'none', why: 'not asked for' };
  const account = isolation.kind === 'user' ? isolation.account : null;
  let logFd: number;
  try {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    logFd = fs.openSync(logFile, 'a', 0o640);
    if (account) {
      fs.chownSync(dir, account.uid, account.gid);
      fs.fchownSync(logFd, account.uid, account.gid);
    }
  } catch (err) {
    return notStarted(dir, logFile, err);
  }
  // The run's own cgroup, made by the agent as itself: the handler's user owns nothing in it. A run
  // whose cgroup cannot be made runs all the same, measured by its process tree.
  let leaf: Leaf | null = null;
  const plan = spec.memoryCgroup;
  if (plan && plan.kind !== 'none') {
    try {
      leaf = createLeaf(plan, cgroupLeafName(spec.task.id), spec.memoryLimitBytes ?? null, spec.cpuWeight ?? null);
    } catch {
      leaf = null;
    }
  }
  const env: NodeJS.ProcessEnv = {
    ...spec.env,
    ...(account ? { HOME: account.home, USER: account.name, LOGNAME: account.name } : {}),
    TAGSCHED_WORK_REQUEST_ID: spec.task.id,
    TAGSCHED_TASK_NAME: spec.task.taskName,
    TAGSCHED_PARALLEL: String(spec.parallel),
    TAGSCHED_REASON_FILE: path.join(dir, REASON_FILE),
  };
  for (const name of SECRET_ENV) delete env[name];
  const namespaces = namespacePrefix(isolation);
  const hide = namespaces.length > 0 && isolation.kind !== 'none' ? (isolation.hide ?? '') : '';
  const argv = [
    // The first process enters the leaf and then becomes the rest: all of the run is inside.
    ...(leaf ? ['/bin/sh', '-c', JOIN_SHELL, 'tagsched-join', leaf.procsFile] : []),
    ...namespaces,
    '/bin/sh',
    '-c',
    MONITOR_SHELL,
    'tagsched-monitor',
    hide,
    dir,
    ...dropPrefix(isolation),
    '/bin/sh',
    '-c',
    HANDLER_SHELL,
    'tagsched-handler',
    spec.command,
  ];
  const child = spawn(argv[0], argv.slice(1), {
    cwd: dir,
    env,
    stdio: ['pipe', logFd, logFd, 'pipe', 'pipe', ...(leaf ? (['pipe'] as const) : [])],
    detached: true,
  });
  fs.closeSync(logFd); // the child holds its own copy
  const joined = new Promise<boolean>((resolve) => {
    const said = (child.stdio as unknown as (Readable | null | undefined)[])[5];
    if (!said) return resolve(false);
    let text = '';
    said.on('data', (d: Buffer) => (text += d.toString('utf8')));
    said.once('close', () => resolve(text.startsWith('joined')));
    said.once('error', () => resolve(false));
  });
  const measurement = startMeasurement(child.pid, dir, leaf ? { leaf, joined } : null);
  const lifeline = child.stdio[3];
  lifeline?.on('error', () => {});
  let times = '';
  const report = child.stdio[4];
  report?.on('error', () => {});
  report?.on('data', (d: Buffer) => {
    if (times.length < 1024) times += d.toString('utf8');
  });
  const reportEnded = new Promise<void>((resolve) => {
    if (!report) return resolve();
    report.once('close', () => resolve());
    report.once('error', () => resolve());
  });
  let killedWith: NodeJS.Signals | null = null;
  const done = new Promise<Outcome>((resolve) => {
    child.once('error', (err) => resolve({ kind: 'not-started', error: err.message }));
    child.once('exit', (code, signal) => {
      lifeline?.destroy(); // the watchdog ends what the handler left running in the background
      if (signal) return resolve({ kind: 'signal', signal });
      // The monitor passes on the handler's status: 128 + the signal that ended it, when it was ours.
      if (killedWith !== null && code === 128 + (SIGNAL_NUMBERS[killedWith] ?? -1000))
        return resolve({ kind: 'signal', signal: killedWith });
      resolve({ kind: 'exit', code: code ?? 0 });
    });
  });
  const usage = done.then(async (outcome) => {
    await Promise.race([reportEnded, new Promise((r) => setTimeout(r, 1000).unref())]);
    report?.destroy();
    // A SIGKILL the agent did not send: the monitor reports a handler it ended as 128 + 9.
    const sigkill =
      killedWith !== 'SIGKILL' &&
      ((outcome.kind === 'signal' && outcome.signal === 'SIGKILL') ||
        (outcome.kind === 'exit' && outcome.code === 128 + 9));
    try {
      return await measurement.finish(times, { sigkill });
    } finally {
      // What the handler left running in the background ends with its cgroup.
      await leaf?.remove();
    }
  });
  // A handler that does not read its stdin closes the pipe early; that is its right.
  child.stdin?.on('error', () => {});
  child.stdin?.end(`${JSON.stringify(spec.task)}\n`);
  return {
    pid: child.pid,
    dir,
    logFile,
    done,
    usage: usage.catch(() => null),
    kill(signal) {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      killedWith = signal;
      try {
        process.kill(-child.pid, signal);
      } catch {
        child.kill(signal);
      }
    },
  };
}

function notStarted(dir: string, logFile: string, err: unknown): Run {
  const error = err instanceof Error ? err.message : String(err);
  return {
    pid: undefined,
    dir,
    logFile,
    done: Promise.resolve({ kind: 'not-started', error }),
    usage: Promise.resolve(null),
    kill() {},
  };
}
