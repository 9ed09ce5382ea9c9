/**
 * The built-in server workers of one process (docs/design.md: server tasks and workflows): worker rows of type `server`, named after
 * the process (TAGSCHED_PROCESS_NAME: services/processes/server-worker-names.ts), that run server tasks in the service itself. They get work the
 * way any worker does (placement, passes, `requestWork`: assigned atomically, leased, retried), report
 * the tasks they have runners for, and are connected while the process runs: they heartbeat, and are
 * marked disconnected when it stops. Their rows are owned by this process in the process registry
 * (`connected_process_id`), so that the leader takes them over when its heartbeat expires
 * (services/processes/registry.ts), and stop() disconnects only those it still owns. Like an agent, they report their metadata at start and again on
 * every tick (well within TAGSCHED_METADATA_FRESH_SECONDS), so they stay available for as long as their
 * process runs: the metadata is what the process has runners for, which does not change while it runs,
 * so the tick's report renews its time. A process killed with work in hand leaves it to the take-over of
 * dead processes (the leader re-queues it once the heartbeat expires) and the lease rules, or, if it comes
 * back under the same name first, takes it back itself at start as an expired lease would be taken.
 *
 * Each task is started with a conditional ASSIGNED → RUNNING on the row (never "already RUNNING, go
 * on"), so a task is run at most once per assignment even if two processes ever shared a name.
 */
import { LockMode } from '@mikro-orm/core';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { intArray } from '../../storage/db/arrays.js';
import { WorkRequestSchema } from '../../storage/entities/work-request.js';
import { WorkerSchema } from '../../storage/entities/worker.js';
import { InvalidStateError } from '../../core/errors.js';
import type { Events } from '../../storage/events.js';
import type { Logger } from '../../core/log.js';
import type { LifecycleRecorder } from '../../services/metrics-recorder.js';
import { isUnacknowledgedSql } from '../../scheduler/rules/active-work.js';
import { expireLeases } from '../../scheduler/storage/leases.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import type { Viewer } from '../../services/identity/auth.js';
import { completeWorkRequest } from '../../services/work/work-lifecycle.js';
import type { WorkRequestDeps } from '../../services/work/work-requests.js';
import { settleDependents } from '../../services/workflows/settle-dependents.js';
import { refreshWorkerTags } from '../../services/workers/worker-tags.js';
import { serverWorkerName } from '../../services/processes/server-worker-names.js';
import { findServerTaskRunner, SERVER_TASK_RUNNERS } from './registry.js';
import type { ServerTaskOutcome, ServerTaskRunner } from './types.js';

/** The server workers of a process. */
export interface ServerWorkers {
  /** Their names, once started. */
  readonly names: readonly string[];
  /** Registers (or takes over) the workers of this process, named after it, and starts taking work. */
  start(): Promise<void>;
  /** Takes nothing new, waits a while for what runs, and marks the workers it still owns disconnected. */
  stop(): Promise<void>;
}

/** A built-in server worker acts without a bearer token (token ids start at 1). */
const NO_TOKEN = 0;
/** How long stop() waits for running server tasks before leaving them to the lease rules. */
const STOP_GRACE_MS = 10_000;

/** `server-<process name>` (and `-N` when there are several): services/processes/server-worker-names.ts. */
export { serverWorkerName };

/**
 * The heartbeat, metadata report and catch-up period: well within both leases and the metadata freshness
 * window, so a live server worker never loses a lease nor turns STALE.
 */
export function tickMsOf(config: Pick<Config, 'leases' | 'workers'>): number {
  return Math.min(
    30_000,
    Math.max(
      250,
      Math.min(config.leases.ackTimeoutMs, config.leases.heartbeatTimeoutMs, config.workers.metadataFreshMs) / 4,
    ),
  );
}

/** Creates the server workers of this process (nothing happens before start()). */
export function createServerWorkers(deps: {
  orm: MikroORM;
  /** Their own section, the leases', the process name, and what the work-request operations they call read. */
  config: Pick<Config, 'serverWorkers' | 'leases' | 'server'> & WorkRequestDeps['config'];
  /** This process's id in the process registry (services/processes/registry.ts): the owner of its server workers' rows. */
  processId: number;
  log: Logger;
  events: Events;
  scheduler: Scheduler;
  metrics?: LifecycleRecorder;
  runners?: readonly ServerTaskRunner[];
}): ServerWorkers {
  const { orm, config, events, scheduler, metrics, processId } = deps;
  const log = deps.log.child({ component: 'server-workers' });
  const runners = deps.runners ?? SERVER_TASK_RUNNERS;
  const workers: { id: number; name: string }[] = [];
  const running = new Map<number, Promise<void>>();
  const streams: AsyncIterator<unknown>[] = [];
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | null = null;
  // The tick running, if any: stop() waits for it, so that its write cannot land after the disconnection.
  let ticking: Promise<void> | null = null;

  /** Creates or takes over the row of one server worker, taking back what a previous process of that name held. */
  async function register(name: string): Promise<{ id: number; name: string } | null> {
    const { worker, changes, settled } = await orm.em.fork().transactional(async (tx) => {
      const existing = await tx.findOne(WorkerSchema, { name }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (existing && existing.type !== 'server') return { worker: null, changes: [], settled: [] };
      const now = new Date();
      // Its previous process is gone (this one holds its port): what it held is taken back before this
      // one heartbeats, which would otherwise keep a dead run's lease alive forever.
      const changes = existing
        ? await expireLeases(
            tx,
            now,
            { ackTimeoutMs: 0, heartbeatTimeoutMs: 0, maxRetries: config.leases.maxRetries },
            null,
            existing.id,
          )
        : [];
      const aborted = changes.filter((c) => c.status === 'ABORTED').map((c) => c.id);
      const settled = aborted.length ? await settleDependents(tx, config, aborted) : [];
      const worker = existing ?? tx.create(WorkerSchema, { name, type: 'server' });
      worker.concurrency = config.serverWorkers.concurrency;
      worker.dynamicMetadata = {
        'system:tasks': runners.map((r) => ({ type: 'server', name: r.name, version: r.version })),
      };
      worker.connectedAt = now;
      worker.lastSeenAt = now;
      // A server worker of a retired process (terminated by the registry) runs again under its name.
      if (worker.terminatedAt) {
        worker.terminatedAt = null;
        worker.draining = false;
      }
      worker.metadataReportedAt = now; // its metadata is what this process runs, set just above
      worker.shuttingDown = false;
      refreshWorkerTags(worker, null, config.tags);
      await tx.flush();
      await tx.execute(`update worker set connected_process_id = ? where id = ?`, [processId, worker.id]);
      return { worker: { id: worker.id, name: worker.name }, changes, settled };
    });
    if (!worker) {
      log.error({ name }, 'a worker of another type has the name of this server worker: it is not started');
      return null;
    }
    events.publish('workerChanged', worker);
    for (const c of [...changes, ...settled])
      events.publish('workRequestChanged', { id: c.id, workspaceId: c.workspaceId });
    if (changes.length)
      log.warn(
        { worker: worker.name, taken: changes.map((c) => c.id) },
        'took back the work its previous process held',
      );
    return worker;
  }

  /** ASSIGNED → RUNNING if it is still assigned to this worker; null otherwise (taken back, aborted, already started). */
  async function claim(id: number, workerId: number) {
    return orm.em.fork().transactional(async (tx) => {
      const wr = await tx.findOne(WorkRequestSchema, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (!wr || wr.worker?.id !== workerId || wr.status !== 'ASSIGNED') return null;
      wr.status = 'RUNNING';
      wr.startedAt = new Date();
      await tx.flush();
      return { id: wr.id, taskName: wr.taskName, taskData: wr.taskData, workspaceId: wr.workspace.id };
    });
  }

  async function execute(id: number, worker: { id: number; name: string }): Promise<void> {
    const wr = await claim(id, worker.id);
    if (!wr) return;
    events.publish('workRequestChanged', { id: wr.id, workspaceId: wr.workspaceId });
    log.info({ id, taskName: wr.taskName, worker: worker.name }, 'server task started');
    const runner = findServerTaskRunner(runners, wr.taskName);
    let outcome: ServerTaskOutcome;
    if (!runner) {
      log.error({ id, taskName: wr.taskName }, 'no runner for this server task');
      outcome = { result: 'ERROR', reason: `this server has no runner for the server task ${wr.taskName}` };
    } else {
      try {
        outcome = await runner.run(wr.taskData, { workRequestId: id, log, signal: stopping.signal });
      } catch (err) {
        log.warn({ id, taskName: wr.taskName, err }, 'server task failed');
        outcome = {
          result: 'ERROR',
          reason: `the server task failed: ${err instanceof Error ? err.message : String(err)}`,
        };
      }
    }
    const em = orm.em.fork();
    const viewer: Viewer = { kind: 'worker', worker: em.getReference(WorkerSchema, worker.id), tokenId: NO_TOKEN };
    try {
      await completeWorkRequest({ em, viewer, config, events, scheduler, metrics }, String(id), outcome.result, {
        statusReason: outcome.reason ?? null,
      });
      log.info({ id, result: outcome.result, worker: worker.name }, 'server task finished');
    } catch (err) {
      if (!(err instanceof InvalidStateError)) throw err;
      log.info({ id, result: outcome.result, reason: err.message }, 'server task result dropped'); // aborted or taken back meanwhile
    }
  }

  /** Runs an assignment once per process at a time; each run frees a slot, which is filled at once. */
  function handle(id: number, worker: { id: number; name: string }): void {
    if (running.has(id) || stopping.signal.aborted) return;
    const run = execute(id, worker)
      .catch((err: unknown) => log.error({ id, err }, 'server task could not be handled'))
      .finally(() => {
        running.delete(id);
        void fill(worker);
      });
    running.set(id, run);
  }

  /** Pulls work while this worker has free slots (placement and passes also push to it). */
  async function fill(worker: { id: number; name: string }): Promise<void> {
    try {
      while (!stopping.signal.aborted) {
        const assignment = await scheduler.requestWork(worker.id);
        if (!assignment) return;
        handle(assignment.workRequestId, worker);
      }
    } catch (err) {
      log.warn({ worker: worker.name, err }, 'could not pull work');
    }
  }

  /**
   * Heartbeats and reports its metadata (its time: the runners are fixed for the process), then picks up
   * assignments whose push was missed (a NOTIFY lost while reconnecting) and free slots.
   */
  async function tick(): Promise<void> {
    const ids = intArray(workers.map((w) => w.id));
    const now = new Date();
    const em = orm.em.fork();
    const back = await em.execute<{ id: number; name: string; reconnected: boolean }[]>(
      `with before as (select id, connected_at from worker where id = any(?::int[]) for update)
       update worker w set last_seen_at = ?, metadata_reported_at = ?, connected_at = coalesce(w.connected_at, ?), connected_process_id = ? from before
        where w.id = before.id returning w.id, w.name, before.connected_at is null as reconnected`,
      [ids, now, now, now, processId],
    );
    // Marked disconnected meanwhile (a lease lapsed while the database was out of reach): back now.
    for (const w of back) if (w.reconnected) events.publish('workerChanged', { id: w.id, name: w.name });
    const assigned = await em.execute<{ id: number; worker_id: number }[]>(
      `select r.id, r.worker_id from work_request r where r.worker_id = any(?::int[]) and ${isUnacknowledgedSql('r')} order by r.id`,
      [ids],
    );
    for (const a of assigned)
      handle(
        a.id,
        workers.find((w) => w.id === a.worker_id)!,
      );
    for (const w of workers) void fill(w);
  }

  function listen(worker: { id: number; name: string }): void {
    const stream = events.subscribe('workAssigned', String(worker.id))[Symbol.asyncIterator]();
    streams.push(stream);
    void (async () => {
      for (let next = await stream.next(); !next.done && !stopping.signal.aborted; next = await stream.next())
        handle(next.value.workRequestId, worker);
    })().catch((err: unknown) => log.error({ worker: worker.name, err }, 'server worker stopped listening'));
  }

  return {
    get names() {
      return workers.map((w) => w.name);
    },
    async start() {
      const count = config.serverWorkers.concurrency > 0 ? config.serverWorkers.count : 0;
      for (let i = 1; i <= count; i++) {
        const worker = await register(serverWorkerName(config.server.processName, i, count));
        if (!worker) continue;
        workers.push(worker);
        listen(worker);
      }
      if (!workers.length) return;
      log.info(
        {
          workers: workers.map((w) => w.name),
          concurrency: config.serverWorkers.concurrency,
          tasks: runners.map((r) => r.name),
        },
        'server workers started',
      );
      timer = setInterval(() => {
        ticking = tick().catch((err: unknown) => log.warn({ err }, 'server worker heartbeat failed'));
      }, tickMsOf(config));
      timer.unref();
      for (const w of workers) void fill(w);
    },
    async stop() {
      if (stopping.signal.aborted) return;
      stopping.abort();
      if (timer) clearInterval(timer);
      await ticking; // its "connected" lands before the disconnection below, not after it
      await Promise.all(streams.map((s) => s.return?.()));
      if (!workers.length) return;
      let grace: NodeJS.Timeout | undefined;
      const waited = await Promise.race([
        Promise.allSettled([...running.values()]).then(() => true),
        new Promise<boolean>((resolve) => (grace = setTimeout(() => resolve(false), STOP_GRACE_MS))),
      ]);
      clearTimeout(grace);
      if (!waited)
        log.warn(
          { running: [...running.keys()] },
          'server tasks still running at stop: the lease rules take them back',
        );
      const gone = await orm.em.fork().execute<{ id: number; name: string }[]>(
        `update worker set connected_at = null, connected_process_id = null
            where id = any(?::int[]) and connected_at is not null and connected_process_id = ? returning id, name`,
        [intArray(workers.map((w) => w.id)), processId],
      );
      for (const w of gone) events.publish('workerChanged', w);
    },
  };
}
