import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const LOG_TAIL_CHARS = 64 * 1024;

/** A tagsched server started the way `npm start` starts it, as a child process. */
export interface ServerProcess {
  url: string;
  stderr: () => string;
  /** Its last log lines (stdout, at most the last 64 KiB), to show why a call failed. */
  logTail: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  child: ChildProcess;
}

/**
 * Starts `src/server.ts` with the given environment (PORT=0) and waits for its "listening" log line;
 * `preload` are modules the server process imports first (a test registering a provider stand-in).
 */
export function startServerProcess(
  env: Record<string, string | undefined>,
  timeoutMs = 90_000,
  preload: readonly string[] = [],
): Promise<ServerProcess> {
  const cleanEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env })) {
    if (v !== undefined) cleanEnv[k] = v;
  }
  const imports = preload.flatMap((m) => ['--import', path.resolve(m)]);
  const child = spawn(process.execPath, ['--import', 'tsx', ...imports, path.resolve('src/server.ts')], {
    env: cleanEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start in ${timeoutMs} ms:\n${out}\n${err}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${out}\n${err}`));
    });
    const onData = (d: Buffer) => {
      out += d.toString();
      for (const line of out.split('\n')) {
        if (!line.includes('tagsched is listening')) continue;
        const { url } = JSON.parse(line) as { url: string };
        clearTimeout(timer);
        child.removeAllListeners('exit');
        child.stdout!.off('data', onData);
        // Kept draining, so that the child never blocks on a full pipe; its last 64 KiB are kept.
        let tail = out.slice(-LOG_TAIL_CHARS);
        child.stdout!.on('data', (more: Buffer) => (tail = (tail + more.toString()).slice(-LOG_TAIL_CHARS)));
        resolve({
          url,
          child,
          stderr: () => err,
          logTail: () => tail,
          stop: (signal = 'SIGTERM') =>
            new Promise((done) => {
              if (child.exitCode !== null) return done(child.exitCode);
              child.once('exit', (code) => done(code));
              child.kill(signal);
            }),
        });
        return;
      }
    };
    child.stdout!.on('data', onData);
  });
}

/** Runs one GraphQL operation over real HTTP. */
export async function httpGql(url: string, query: string, variables: Record<string, unknown> = {}, token?: string) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, ...((await res.json()) as { data?: Record<string, any>; errors?: unknown[] }) };
}

/**
 * Runs `src/server.ts` with `env` (PORT=0 unless given) to its exit, as `npm start` would: its exit code
 * and what it wrote on stdout and stderr; killed, and the promise rejected, after `timeoutMs`.
 */
export function runServerToExit(
  env: Record<string, string | undefined>,
  timeoutMs = 90_000,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env }))
    if (v !== undefined) clean[k] = v;
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('src/server.ts')], {
    env: clean,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not exit in ${timeoutMs} ms:\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    });
  });
}
