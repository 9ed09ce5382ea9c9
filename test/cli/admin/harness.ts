/**
 * Running tagsched-admin in tests: in-process through runAdmin (captured stdout, stderr, exit
 * code; an AbortController stands for Ctrl-C), or as a real child process (bin/tagsched-admin.js)
 * with its own environment. Both talk to a real server over real HTTP.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { runAdmin } from '../../../src/cli/admin/program.js';

/** What a run printed and how it ended. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options of one run. */
export interface RunOptions {
  /** The token in TAGSCHED_TOKEN (null: none). */
  token?: string | null;
  env?: Record<string, string | undefined>;
  stdin?: string;
  /** A terminal of this width (default: not a terminal). */
  columns?: number;
  signal?: AbortSignal;
  /** Called with each chunk written to stdout (to watch a --watch). */
  onStdout?: (chunk: string) => void;
}

/** A directory of its own for config files, so that no test reads the real ~/.config. */
export function scratchDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-admin-test-'));
}

/** Runs tagsched-admin in this process against `server`. */
export async function runCli(server: string, argv: string[], options: RunOptions = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const home = options.env?.HOME ?? scratchDir();
  const env: NodeJS.ProcessEnv = {
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    TAGSCHED_SERVER_URL: server,
    ...options.env,
  };
  if (options.token) env.TAGSCHED_TOKEN = options.token;
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const code = await runAdmin(argv, {
    env,
    stdout: {
      isTTY: options.columns !== undefined,
      columns: options.columns,
      write: (s: string) => {
        stdout += s;
        options.onStdout?.(s);
        return true;
      },
    },
    stderr: { write: (s: string) => ((stderr += s), true) },
    stdin: Readable.from([options.stdin ?? '']) as NodeJS.ReadableStream,
    signal: options.signal ?? new AbortController().signal,
  });
  return { code, stdout, stderr };
}

const BIN = path.resolve('bin/tagsched-admin.js');

/** A tagsched-admin child process; `done` resolves when it exits. */
export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  done: Promise<CliResult>;
}

/** Starts bin/tagsched-admin.js (or `bin`) with only the given environment (plus PATH and HOME). */
export function spawnCli(
  argv: string[],
  env: Record<string, string | undefined>,
  options: { stdin?: string; bin?: string } = {},
): CliProcess {
  const clean: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) clean[k] = v;
  const child = spawn(process.execPath, [options.bin ?? BIN, ...argv], { env: clean, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  child.stdin!.end(options.stdin ?? '');
  const done = new Promise<CliResult>((resolve) =>
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 128 : -1), stdout: out, stderr: err })),
  );
  return { child, stdout: () => out, stderr: () => err, done };
}

/** Runs a child tagsched-admin to its end. */
export function execCli(
  argv: string[],
  env: Record<string, string | undefined>,
  options: { stdin?: string; bin?: string } = {},
): Promise<CliResult> {
  return spawnCli(argv, env, options).done;
}

/** A local port nothing listens on (one the system just gave out and took back). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
