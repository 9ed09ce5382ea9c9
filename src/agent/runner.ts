/**
 * Runs one task through its handler command: `/bin/sh` in a fresh directory, the task as JSON on
 * stdin, output to a log file the agent never reads, and the exit status mapped to the work
 * request's result. A handler does not outlive the agent.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

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
}

/** A started handler. */
export interface Run {
  readonly pid: number | undefined;
  readonly dir: string;
  readonly logFile: string;
  /** Settles when the handler has exited; never rejects. */
  readonly done: Promise<Outcome>;
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
 * Starts the handler. The directory is emptied first (a request re-run after a restart starts
 * clean). The handler gets its own process group, so a Ctrl-C at the agent's terminal drains
 * the agent instead of killing the build, and a kill reaches the handler's children too.
 */
export function startRun(spec: RunSpec): Run {
  const dir = path.join(spec.runsDir, runDirName(spec.task.id));
  const logFile = path.join(dir, 'log');
  let logFd: number;
  try {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    logFd = fs.openSync(logFile, 'a', 0o640);
  } catch (err) {
    return notStarted(dir, logFile, err);
  }
  const env: NodeJS.ProcessEnv = {
    ...spec.env,
    TAGSCHED_WORK_REQUEST_ID: spec.task.id,
    TAGSCHED_TASK_NAME: spec.task.taskName,
    TAGSCHED_PARALLEL: String(spec.parallel),
    TAGSCHED_REASON_FILE: path.join(dir, REASON_FILE),
  };
  for (const name of SECRET_ENV) delete env[name];
  const child = spawn('/bin/sh', ['-c', HANDLER_SHELL, 'tagsched-handler', spec.command], {
    cwd: dir,
    env,
    stdio: ['pipe', logFd, logFd, 'pipe'],
    detached: true,
  });
  fs.closeSync(logFd); // the child holds its own copy
  const lifeline = child.stdio[3];
  lifeline?.on('error', () => {});
  const done = new Promise<Outcome>((resolve) => {
    child.once('error', (err) => resolve({ kind: 'not-started', error: err.message }));
    child.once('exit', (code, signal) => {
      lifeline?.destroy(); // the watchdog ends what the handler left running in the background
      resolve(signal ? { kind: 'signal', signal } : { kind: 'exit', code: code ?? 0 });
    });
  });
  // A handler that does not read its stdin closes the pipe early; that is its right.
  child.stdin?.on('error', () => {});
  child.stdin?.end(`${JSON.stringify(spec.task)}\n`);
  return {
    pid: child.pid,
    dir,
    logFile,
    done,
    kill(signal) {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
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
  return { pid: undefined, dir, logFile, done: Promise.resolve({ kind: 'not-started', error }), kill() {} };
}
