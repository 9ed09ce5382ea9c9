/**
 * The `local` provider: each instance is a tagsched-worker process on the server's own machine,
 * started with its activation token in its environment (never on its command line), in its own
 * directory `<data dir>/local-workers/<pool>/<name>/` (its work directory `work/`, its state file
 * `state.json` with the worker token, and `instance.json`, what this provider knows of it), running
 * the pool's handlers. Its output goes to its instance log (instance-logs.ts), which stays when the
 * directory is deleted after the agent stopped.
 *
 * Its handlers run as the server's user, so the agent is told to run them in user, mount and PID
 * namespaces whatever that user is (`--handler-isolation namespace`, agent/isolation.ts), with the
 * whole data directory hidden (`--hidden-dir`: their run's directory is all they see of it): neither
 * their own agent's token, nor another agent's, nor the server's secret key, nor the agents'
 * processes. An agent that cannot make those namespaces does not start (its instance log says why).
 *
 * Its list is read from those directories and the processes they name (a pid and its start time,
 * so that a reused pid is never taken for the agent), not from memory: every server process sharing
 * the data directory sees the same list, and agents that outlive a killed server are found again by
 * the next one. A server that stops cleanly stops the agents it started itself (close). Stop is
 * SIGTERM (the agent drains), then SIGKILL once the grace period is over.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_LOCAL_HANDLERS } from './local-handlers.js';
import type { PoolSpecifications } from '../core/tags/worker-tags.js';
import type { Provider, ProviderDeps, ProviderInstance } from './provider.js';
import { ProviderError } from './provider.js';
import { prepareInstanceLog } from './instance-logs.js';
import { instanceNames, readInstanceRecord, writeInstanceRecord } from './instance-record.js';

const AGENT_BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/tagsched-worker.js');

/** Variables of the server's environment an agent keeps; nothing else (the server's secrets stay with it). */
const INHERITED_ENV = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'] as const;

/** What the provider writes next to each agent. */
interface InstanceRecord {
  name: string;
  pool: string;
  pid: number;
  /** The process's start time (clock ticks since boot, /proc/<pid>/stat), to tell it from a later one with the same pid; null off Linux. */
  startTicks: string | null;
  createdAt: string;
  stopRequestedAt: string | null;
  /** When this server saw the agent exit (a child of its own); absent when it did not see it. */
  exitedAt?: string;
}

/** The start time and state of a process, from /proc; null when there is no such process. */
function procStat(pid: number): { state: string; startTicks: string } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0], startTicks: fields[19] };
  } catch {
    return null;
  }
}

const hasProc = fs.existsSync('/proc/self/stat');

/** Whether the agent a record names is still running (not a zombie, not a later process with its pid). */
function alive(record: InstanceRecord): boolean {
  if (!hasProc) {
    try {
      process.kill(record.pid, 0);
      return true;
    } catch {
      return false;
    }
  }
  const stat = procStat(record.pid);
  return stat !== null && stat.state !== 'Z' && (record.startTicks === null || stat.startTicks === record.startTicks);
}

const readRecord = (dir: string) => readInstanceRecord<InstanceRecord>(dir);
const writeRecord = (dir: string, record: InstanceRecord) => writeInstanceRecord(dir, record);

/** `NAME=COMMAND` lines for TAGSCHED_HANDLERS (commands hold no newline: pool-specifications.ts). */
function handlerList(specifications: PoolSpecifications): string {
  const handlers = specifications.handlers?.length ? specifications.handlers : DEFAULT_LOCAL_HANDLERS;
  return handlers.map((h) => `${h.task}=${h.command}`).join('\n');
}

/** Creates the local provider of one server process. */
export function createLocalProvider({ config, log, instanceEnded }: ProviderDeps): Provider {
  const root = path.join(config.server.dataDir, 'local-workers');
  // The agents this process started, to stop them when it stops, and their SIGKILL timers.
  const children = new Map<string, { child: ChildProcess; exited: Promise<void>; killTimer: NodeJS.Timeout | null }>();
  // Heartbeats well within the server's own lease: a quarter of it, at most the agent's default.
  const heartbeatSeconds = Math.max(1, Math.min(30, Math.floor(config.leases.heartbeatTimeoutMs / 4000)));

  const dirOf = (pool: string, name: string) => path.join(root, pool, name);
  /** An instance's directory, whatever its pool (instance names are unique in the farm). */
  const findDir = (name: string): string | null => {
    let pools: string[];
    try {
      pools = fs.readdirSync(root);
    } catch {
      return null;
    }
    for (const pool of pools) {
      const dir = dirOf(pool, name);
      if (fs.existsSync(dir)) return dir;
    }
    return null;
  };

  function signal(record: InstanceRecord, sig: NodeJS.Signals): void {
    try {
      process.kill(record.pid, sig);
    } catch {
      // already gone
    }
  }

  function stop(dir: string, record: InstanceRecord): void {
    const now = Date.now();
    if (!record.stopRequestedAt) {
      writeRecord(dir, { ...record, stopRequestedAt: new Date(now).toISOString() });
      signal(record, 'SIGTERM');
      const mine = children.get(record.name);
      if (mine && !mine.killTimer) {
        mine.killTimer = setTimeout(() => alive(record) && signal(record, 'SIGKILL'), config.providers.stopGraceMs);
        mine.killTimer.unref();
      }
      log.info({ instance: record.name, pid: record.pid }, 'local agent asked to stop (SIGTERM)');
    } else if (now - Date.parse(record.stopRequestedAt) >= config.providers.stopGraceMs) {
      log.warn(
        { instance: record.name, pid: record.pid, graceMs: config.providers.stopGraceMs },
        'local agent still running after the grace period: SIGKILL',
      );
      signal(record, 'SIGKILL');
    }
  }

  return {
    async launch(spec) {
      const dir = dirOf(spec.pool, spec.name);
      const known = readRecord(dir);
      if (known && alive(known)) return { id: spec.name }; // launched already: once only
      const workDir = path.join(dir, 'work');
      try {
        fs.mkdirSync(workDir, { recursive: true, mode: 0o700 });
      } catch (err) {
        throw new ProviderError(
          'unavailable',
          `cannot create the local agent's directory ${dir}: ${(err as Error).message}`,
        );
      }
      const env: Record<string, string> = {};
      for (const key of INHERITED_ENV) if (process.env[key]) env[key] = process.env[key]!;
      Object.assign(env, {
        TAGSCHED_SERVER_URL: spec.agent.serverUrl,
        TAGSCHED_ACTIVATION_TOKEN: spec.agent.activationToken,
        TAGSCHED_WORKER_NAME: spec.agent.workerName,
        TAGSCHED_WORK_DIR: workDir,
        // Out of the handlers' reach: the data directory is hidden from them, and the agent is not in their /proc.
        TAGSCHED_STATE_FILE: path.join(dir, 'state.json'),
        TAGSCHED_HIDDEN_DIR: config.server.dataDir,
        TAGSCHED_HANDLER_ISOLATION: 'namespace',
        TAGSCHED_HANDLERS: handlerList(spec.specifications as PoolSpecifications),
        TAGSCHED_HEARTBEAT_INTERVAL: String(heartbeatSeconds),
        TAGSCHED_MAX_BACKOFF: String(Math.min(30, heartbeatSeconds * 2)),
      });
      const out = fs.openSync(prepareInstanceLog(config.providers.instanceLogDir, spec.name), 'a', 0o600);
      let child: ChildProcess;
      try {
        child = spawn(process.execPath, [AGENT_BIN], { cwd: dir, env, stdio: ['ignore', out, out] });
      } finally {
        fs.closeSync(out);
      }
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', (err) =>
          reject(new ProviderError('unavailable', `cannot start ${AGENT_BIN}: ${err.message}`)),
        );
      });
      const pid = child.pid!;
      writeRecord(dir, {
        name: spec.name,
        pool: spec.pool,
        pid,
        startTicks: procStat(pid)?.startTicks ?? null,
        createdAt: new Date().toISOString(),
        stopRequestedAt: null,
      });
      const exited = new Promise<void>((resolve) =>
        child.once('exit', (code, sig) => {
          const mine = children.get(spec.name);
          if (mine?.killTimer) clearTimeout(mine.killTimer);
          children.delete(spec.name);
          log.info({ instance: spec.name, pid, code, signal: sig }, 'local agent exited');
          // The time of the end, for reconciliation (list), which is asked for now.
          const record = readRecord(dir);
          if (record && record.pid === pid) writeRecord(dir, { ...record, exitedAt: new Date().toISOString() });
          instanceEnded?.(spec.pool);
          resolve();
        }),
      );
      children.set(spec.name, { child, exited, killTimer: null });
      log.info({ instance: spec.name, pool: spec.pool, pid, dir }, 'local agent started');
      return { id: spec.name };
    },

    async terminate(id) {
      const dir = findDir(id);
      if (!dir) return;
      const record = readRecord(dir);
      if (!record || !alive(record)) {
        fs.rmSync(dir, { recursive: true, force: true });
        return;
      }
      stop(dir, record);
    },

    async list(pool) {
      const out: ProviderInstance[] = [];
      for (const name of instanceNames(root, pool)) {
        const record = readRecord(dirOf(pool, name));
        if (!record) continue;
        if (!alive(record)) {
          // A child of this process that died before its exit event was handled ended by itself too: now.
          const endedAt = record.exitedAt ? new Date(record.exitedAt) : children.has(record.name) ? new Date() : null;
          if (endedAt)
            out.push({
              id: record.name,
              name: record.name,
              state: 'gone',
              createdAt: new Date(record.createdAt),
              endedAt,
            });
          continue;
        }
        out.push({
          id: record.name,
          name: record.name,
          state: record.stopRequestedAt ? 'stopping' : 'running',
          createdAt: new Date(record.createdAt),
        });
      }
      return out;
    },

    async close() {
      const running = [...children.entries()];
      for (const [name] of running) {
        const dir = findDir(name);
        const record = dir ? readRecord(dir) : null;
        if (dir && record && alive(record) && !record.stopRequestedAt) stop(dir, record);
      }
      const all = Promise.all(running.map(([, c]) => c.exited));
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<'late'>(
        (resolve) => (timer = setTimeout(() => resolve('late'), config.providers.stopGraceMs)),
      );
      if ((await Promise.race([all, late])) === 'late') {
        for (const [, c] of running) c.child.kill('SIGKILL');
        await all;
      }
      clearTimeout(timer);
    },
  };
}
