/**
 * Runs one command for the exec provider: argv without a shell, a document on stdin, stdout read up
 * to a cap, the end of stderr kept blanked of the account, in a process group of its own that is
 * killed whole when the call is cut short.
 */
import { spawn } from 'node:child_process';
import type { Redactor } from './redact.js';

export interface CommandRun {
  /** The exit status, or null when a signal ended it. */
  readonly exitCode: number | null;
  readonly exitSignal: NodeJS.Signals | null;
  readonly stdout: string;
  /** The last `maxStderrBytes` of what it wrote on stderr, blanked by `redact` before the cut. */
  readonly stderr: string;
  /** What ended it early: its stdout passed the cap, or the signal aborted. */
  readonly cut: 'answer-too-large' | 'aborted' | null;
  /** The command could not be started at all (ENOENT, EACCES…). */
  readonly spawnError: NodeJS.ErrnoException | null;
}

export interface RunOptions {
  readonly input: string;
  readonly env: Readonly<Record<string, string>>;
  readonly signal: AbortSignal;
  readonly maxStdoutBytes: number;
  readonly maxStderrBytes: number;
  /** The call's redactor: stderr is kept `redact.reach` bytes longer than it is shown, and blanked before it is cut. */
  readonly redact: Redactor;
  /**
   * After the command exits, how long its stdout may stay open (a child it left behind holding the
   * pipe) before it is read as finished, in milliseconds.
   */
  readonly closeGraceMs: number;
}

/** Runs `argv` to its end (or until it is cut) and gives back what it said. Never throws. */
export function runCommand(argv: readonly string[], options: RunOptions): Promise<CommandRun> {
  return new Promise((resolve) => {
    const [command, ...args] = argv;
    const child = spawn(command!, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...options.env },
      cwd: '/',
      // Its own process group, so that a timeout kills whatever it started as well.
      detached: true,
      shell: false,
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = Buffer.alloc(0);
    // The raw end of stderr: a secret that ends in what is shown may begin up to `reach` bytes before it.
    const stderrWindow = options.maxStderrBytes + options.redact.reach;
    let stderrClipped = false;
    let cut: CommandRun['cut'] = null;
    let spawnError: NodeJS.ErrnoException | null = null;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let settled = false;
    let graceTimer: NodeJS.Timeout | undefined;

    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(graceTimer);
      options.signal.removeEventListener('abort', onAbort);
      child.stdout.destroy();
      child.stderr.destroy();
      resolve({
        exitCode: exit?.code ?? null,
        exitSignal: exit?.signal ?? null,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: options.redact.tail(stderr, options.maxStderrBytes, stderrClipped),
        cut,
        spawnError,
      });
    };
    const onAbort = () => {
      cut ??= 'aborted';
      killGroup();
    };

    child.on('error', (err: NodeJS.ErrnoException) => {
      // Only a failed start reaches here with no pid; a failed kill of a gone process is no news.
      if (child.pid === undefined) {
        spawnError = err;
        finish();
      }
    });
    child.stdout.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > options.maxStdoutBytes) {
        cut ??= 'answer-too-large';
        killGroup();
        return;
      }
      stdout.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = Buffer.concat([stderr, chunk]);
      if (stderr.length > stderrWindow) {
        stderr = stderr.subarray(stderr.length - stderrWindow);
        stderrClipped = true;
      }
    });
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      graceTimer = setTimeout(finish, options.closeGraceMs);
    });
    child.on('close', (code, signal) => {
      exit ??= { code, signal };
      finish();
    });
    // A command that does not read its stdin closes the pipe early: that is its business.
    child.stdin.on('error', () => {});
    if (options.signal.aborted) onAbort();
    else options.signal.addEventListener('abort', onAbort);
    child.stdin.end(options.input);
  });
}
