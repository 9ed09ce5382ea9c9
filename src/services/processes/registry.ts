/**
 * The process registry (docs/operating/deployment.md: process registry): one `server_process` row per
 * server process name, with a heartbeat every process writes (leaderless), and the workers each one
 * owns (`worker.connected_process_id`: the process holding the worker's WebSocket). The leader's chores
 * call takeOverDeadProcesses: a process whose heartbeat expired (or that stopped) while it still owned
 * workers has them marked disconnected and their unacknowledged work re-queued, within seconds rather
 * than after the leases; a row silent for a week is deleted, and the server workers named after it with it.
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import type { Logger } from '../../core/log.js';
import { LIST_MAXIMA } from '../input/list-maxima.js';
import { retryingDeadlocks } from '../../storage/db/deadlocks.js';
import { ServerProcessSchema } from '../../storage/entities/server-process.js';
import type { Events } from '../../storage/events.js';
import { requeueWorkOfLostProcess, type LeaseChange } from '../../scheduler/storage/leases.js';
import { requireAdmin, type Viewer } from '../identity/auth.js';
import { settleDependents } from '../workflows/settle-dependents.js';
import { publishTermination, terminateIn, type Terminated } from '../workers/terminate.js';
import { isServerWorkerOf } from './server-worker-names.js';

/** A registry row silent for this long is deleted (a retired process's rows do not pile up). */
export const PROCESS_RETENTION_MS = 7 * 24 * 3600_000;

/**
 * This process's row, by `config.server.processName`: inserted, or taken over under its name (a restart),
 * with this host and pid, started and heard from now (the database's clock, as every heartbeat and the
 * take-over read it: the hosts' clocks need not agree), not stopped. Returns its id. When the row belonged to
 * another process that is alive by its heartbeat (another host or pid under the same name), `log` is warned:
 * two processes of one name share their registry row and their server workers.
 */
export async function registerProcess(
  em: EntityManager,
  config: Pick<Config, 'server'>,
  log?: Logger,
): Promise<number> {
  const { processName, hostName, processTimeoutMs } = config.server;
  const [row] = await em.execute<
    { id: number; previous_host: string | null; previous_pid: number | null; previous_alive: boolean | null }[]
  >(
    `with previous as (
       select host, pid, stopped_at is null and heartbeat_at >= now() - ? * interval '1 millisecond' as alive
         from server_process where name = ?
     )
     insert into server_process (name, host, pid, started_at, heartbeat_at, stopped_at) values (?, ?, ?, now(), now(), null)
     on conflict (name) do update
        set host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
            heartbeat_at = excluded.heartbeat_at, stopped_at = null
     returning id, (select host from previous) as previous_host, (select pid from previous) as previous_pid,
               (select alive from previous) as previous_alive`,
    [processTimeoutMs, processName, processName, hostName, process.pid],
  );
  if (row!.previous_alive && (row!.previous_host !== hostName || row!.previous_pid !== process.pid))
    log?.warn(
      { processName, otherHost: row!.previous_host, otherPid: row!.previous_pid },
      'another live process has this process name (TAGSCHED_PROCESS_NAME): give each process a name of its own',
    );
  return row!.id;
}

/** The heartbeat of this process's registry row; see {@link createProcessHeartbeat}. */
export interface ProcessHeartbeat {
  /**
   * Writes the heartbeat every `processHeartbeatMs` from now on. `lapsed` is called after a beat that
   * found the previous one older than `processTimeoutMs` (the process was paused, or could not reach the
   * database): the chores leader may have taken its workers over meanwhile.
   */
  start(lapsed?: () => Promise<unknown>): void;
  /** Stops writing it and records the process stopped (a clean stop: it holds no connection any more). */
  stop(): Promise<void>;
}

/**
 * Every process's own heartbeat (no leader): every `config.server.processHeartbeatMs` its row's `heartbeat_at`
 * is set to now, and its `stopped_at` cleared (a process that beats runs). A beat still in flight when the
 * next is due is not doubled; a failed one is logged, and the next tries again.
 */
export function createProcessHeartbeat(deps: {
  orm: MikroORM;
  config: Pick<Config, 'server'>;
  log: Logger;
}): ProcessHeartbeat {
  const { orm, config } = deps;
  const log = deps.log.child({ component: 'process-registry' });
  const { processName, processHeartbeatMs } = config.server;
  let timer: NodeJS.Timeout | null = null;
  let beating: Promise<void> | null = null;
  let warnedMissing = false;

  let lapsed: (() => Promise<unknown>) | undefined;

  const beat = async (): Promise<void> => {
    // The previous beat read under the row's lock: a take-over holding it (registry rows are locked
    // first) has committed by then, and a lapse it acted on is seen.
    const rows = await orm.em.fork().execute<{ id: number; lapsed: boolean }[]>(
      `update server_process s set heartbeat_at = now(), stopped_at = null
         from (select id, heartbeat_at from server_process where name = ? for update) prev
        where s.id = prev.id
       returning s.id, prev.heartbeat_at < now() - ? * interval '1 millisecond' as lapsed`,
      [processName, config.server.processTimeoutMs],
    );
    if (rows[0]?.lapsed && lapsed) {
      log.warn({ processName }, 'this process was silent past its timeout: its workers may have been taken over');
      await lapsed();
    }
    if (!rows.length && !warnedMissing) {
      warnedMissing = true;
      log.warn(
        { processName },
        'the registry row of this process is gone: it is no longer listed, nor owns its workers',
      );
    }
  };

  return {
    start(onLapsed) {
      if (timer) return;
      lapsed = onLapsed;
      timer = setInterval(() => {
        if (beating) return;
        beating = beat()
          .catch((err: unknown) => log.warn({ err }, 'could not write the process heartbeat'))
          .finally(() => (beating = null));
      }, processHeartbeatMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await beating;
      await orm.em
        .fork()
        .execute(`update server_process set stopped_at = ? where name = ?`, [new Date(), processName])
        .catch((err: unknown) => log.warn({ err }, 'could not record this process stopped'));
    },
  };
}

/** What one take-over did, for its log line. */
export interface TakeOver {
  /** Dead or stopped processes whose workers were taken over. */
  readonly processes: number;
  /** Their workers marked disconnected, server workers included. */
  readonly workers: number;
  /** Of those, built-in server workers. */
  readonly serverWorkers: number;
  /** Requests taken back (PENDING again, or ABORTED past the retries). */
  readonly requeued: number;
  /** Registry rows deleted, silent for a week. */
  readonly deleted: number;
  /** Server workers of the deleted processes terminated. */
  readonly terminated: number;
}

/**
 * Takes over from dead processes (the leader's chores call it): for every registered process whose
 * heartbeat is older than `processTimeoutMs`, or that stopped, and that still owns workers, its
 * workers are marked disconnected and no longer owned, and their ASSIGNED work goes back to PENDING
 * uncounted; its built-in server workers' RUNNING work too, as a retry (requeueWorkOfLostProcess).
 * Then the rows silent for PROCESS_RETENTION_MS are deleted, and the server workers named after them
 * terminated (terminateIn) unless they are connected or a remaining process has their name. A row
 * another transaction holds is left for the next call, so two processes may run it at once; a second
 * call finds nothing left to do. Publishes after each commit.
 */
export async function takeOverDeadProcesses(
  em: EntityManager,
  events: Events,
  config: Pick<Config, 'server' | 'leases' | 'tags' | 'statistics'>,
  now: Date,
): Promise<TakeOver> {
  const taken = await retryingDeadlocks(() =>
    em.fork().transactional(async (tx) => {
      const dead = await tx.execute<{ id: number; name: string; stopped: boolean }[]>(
        `select p.id, p.name, p.stopped_at is not null as stopped from server_process p
          where (p.stopped_at is not null or p.heartbeat_at < now() - ? * interval '1 millisecond')
            and exists (select 1 from worker k where k.connected_process_id = p.id)
          order by p.id
          for update of p skip locked`,
        [config.server.processTimeoutMs],
      );
      const workers: { id: number; name: string; type: string }[] = [];
      const changes: LeaseChange[] = [];
      for (const p of dead) {
        // Locked in id order; a worker that connected to another process meanwhile is that one's now.
        const mine = await tx.execute<{ id: number; name: string; type: string }[]>(
          `update worker set connected_at = null, connected_process_id = null
            where id in (select id from worker where connected_process_id = ? order by id for update)
              and connected_process_id = ?
           returning id, name, type`,
          [p.id, p.id],
        );
        workers.push(...mine);
        const why = p.stopped ? `${p.name} stopped` : `${p.name} stopped heartbeating`;
        changes.push(
          ...(await requeueWorkOfLostProcess(
            tx,
            mine.map((w) => w.id),
            why,
            now,
            config.leases,
          )),
        );
      }
      const aborted = changes.filter((c) => c.status === 'ABORTED').map((c) => c.id);
      const settled = aborted.length ? await settleDependents(tx, config, aborted) : [];
      return { dead, workers, changes, settled };
    }),
  );
  for (const w of taken.workers) events.publish('workerChanged', { id: w.id, name: w.name });
  for (const c of [...taken.changes, ...taken.settled])
    events.publish('workRequestChanged', { id: c.id, workspaceId: c.workspaceId });

  const retired = await retryingDeadlocks(() =>
    em.fork().transactional(async (tx) => {
      const deleted = await tx.execute<{ name: string }[]>(
        `delete from server_process
          where id in (select id from server_process
                        where heartbeat_at < now() - ? * interval '1 millisecond' for update skip locked)
         returning name`,
        [PROCESS_RETENTION_MS],
      );
      const none: Terminated = { workers: [], requeued: [], settled: [] };
      if (!deleted.length) return { deleted: 0, terminated: none };
      const remaining = (await tx.execute<{ name: string }[]>(`select name from server_process`)).map((r) => r.name);
      const idle = await tx.execute<{ id: number; name: string }[]>(
        `select id, name from worker
          where type = 'server' and terminated_at is null and connected_at is null and connected_process_id is null`,
      );
      const orphans = idle.filter(
        (w) =>
          deleted.some((d) => isServerWorkerOf(w.name, d.name)) &&
          !remaining.some((name) => isServerWorkerOf(w.name, name)),
      );
      const terminated = await terminateIn(
        tx,
        config,
        orphans.map((w) => w.id),
        'its server process is retired',
        { state: 'TERMINATED', error: null },
        now,
      );
      return { deleted: deleted.length, terminated };
    }),
  );
  publishTermination(events, retired.terminated);

  return {
    processes: taken.dead.length,
    workers: taken.workers.length,
    serverWorkers: taken.workers.filter((w) => w.type === 'server').length,
    requeued: taken.changes.length,
    deleted: retired.deleted,
    terminated: retired.terminated.workers.length,
  };
}

/** One registered process as the `serverProcesses` query shows it. */
export interface ProcessView {
  readonly name: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: Date;
  readonly heartbeatAt: Date;
  readonly stoppedAt: Date | null;
  /** Not stopped, and heard from within `processTimeoutMs`. */
  readonly alive: boolean;
}

/** The registered processes, by name (the first LIST_MAXIMA.processesShown). Admin only. */
export async function listProcesses(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'server'>,
  now: Date = new Date(),
): Promise<ProcessView[]> {
  requireAdmin(viewer);
  const rows = await em.find(ServerProcessSchema, {}, { orderBy: { name: 'asc' }, limit: LIST_MAXIMA.processesShown });
  const since = now.getTime() - config.server.processTimeoutMs;
  return rows.map((p) => ({
    name: p.name,
    host: p.host,
    pid: p.pid,
    startedAt: p.startedAt,
    heartbeatAt: p.heartbeatAt,
    stoppedAt: p.stoppedAt ?? null,
    alive: !p.stoppedAt && p.heartbeatAt.getTime() >= since,
  }));
}
