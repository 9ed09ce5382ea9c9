import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../core/config/config.js';
import { isFinished, type WorkRequestStatus } from '../core/work-request-status.js';
import type { Events } from '../storage/events.js';
import type { Logger } from '../core/log.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { NO_SCHEDULER_METRICS, type AssignmentVia, type SchedulerMetrics } from './scheduler-metrics.js';
import { ClassCache } from './matching/class-cache.js';
import { disconnectSilentWorkers, expireLeases } from './storage/leases.js';
import { compactPendingCounts } from './storage/pending-counts.js';
import { forgetEndedBackoffs } from './storage/release-backoffs.js';
import type { Assignment } from './storage/assign.js';
import {
  assignNextWork,
  assignNextWorkInOneTrip,
  isLockTimeout,
  PullShapes,
  type CallSeen,
  type NextAssignment,
} from './storage/next-work.js';
import { runPass } from './storage/pass.js';
import { placeRequest } from './storage/place.js';
import { TaskHistoryCache } from './storage/task-history.js';
import { WorkerSnapshot } from './storage/worker-snapshot.js';

/**
 * Whether a change of a request, known by its status after the change, may let a pass assign
 * something: work became PENDING, or a worker's slot was freed (COMPLETED, ABORTED) and not refilled
 * already by that worker's own pull. An assignment, a start (RUNNING) or a request left BLOCKED never
 * does. A change published without its status may.
 */
export function changeMayAllowAssignments(change: { status?: WorkRequestStatus; slotRefilled?: boolean }): boolean {
  if (change.slotRefilled) return false;
  return change.status === undefined || change.status === 'PENDING' || isFinished(change.status);
}

/** Why a pass was asked for (logged, and useful when reading a trace). */
export type PassReason = 'new-pending' | 'worker-changed' | 'work-finished' | 'periodic' | 'startup';

/** The process's scheduler: pull assignment, event-triggered passes and the periodic fallback pass. */
export interface Scheduler {
  readonly classes: ClassCache;
  /** The workers' shapes (tags, pool, concurrency), kept for the bulk questions. */
  readonly workers: WorkerSnapshot;
  /** The tasks' average run times, which may make work heavy (heavy-work.ts), read at most once a minute. */
  readonly history: TaskHistoryCache;
  /**
   * Assigns the next request to this worker (in one round trip when the worker's shape is known, else
   * in a transaction of its own), or returns null. `seen`: the worker's call recorded there, first
   * (next-work.ts).
   */
  requestWork(workerId: number, options?: { seen?: CallSeen }): Promise<NextAssignment | null>;
  /**
   * Places a request that just became PENDING on a free worker at once, if there is one (place.ts),
   * before its change is published; the passes that change triggers then find nothing to do.
   */
  placeNew(request: { id: number; classId: number; taskType: string; taskName: string }): Promise<NextAssignment[]>;
  /** Runs one full pass now. */
  runPass(): Promise<Assignment[]>;
  /** Takes back expired assignments and runs of silent workers (also done before every periodic pass). */
  sweepLeases(now?: Date): Promise<number>;
  /** Gives a quarantine probe to every quarantined worker due one (also done after every periodic sweep); returns the probes given. */
  probeQuarantined(now?: Date): Promise<Assignment[]>;
  /** Asks for a pass soon; calls close together share one pass. */
  trigger(reason: PassReason): void;
  start(): void;
  stop(): Promise<void>;
}

/** What happens to the dependents of requests a lease sweep aborted (the work-request lifecycle, given by the app with its configuration). */
export type SettleDependents = (
  em: EntityManager,
  abortedIds: number[],
) => Promise<{ id: number; workspaceId: number }[]>;

/**
 * Gives quarantined workers their probes, in the caller's transaction (services/work/quarantine-probes.ts,
 * given by the app with its configuration): the probes given, and the due workers that could not be probed, with why.
 */
export type StartProbes = (
  em: EntityManager,
  now: Date,
) => Promise<{ started: (Assignment & { workerName: string })[]; skipped: { workerName: string; why: string }[] }>;

/** Creates the scheduler of one server process. */
export function createScheduler(deps: {
  orm: MikroORM;
  config: Pick<Config, 'scheduler' | 'workers' | 'leases' | 'statistics'>;
  log: Logger;
  events: Events;
  settleDependents: SettleDependents;
  startProbes?: StartProbes;
  metrics?: SchedulerMetrics;
  /**
   * Whether this process does the periodic chores now (the lease sweep, the quarantine probes): the
   * leader of the chores duty (loops/leadership.ts) among several processes; always, when absent.
   */
  leadsChores?: () => boolean;
}): Scheduler {
  const { orm, config, log, events, settleDependents, startProbes } = deps;
  const metrics = deps.metrics ?? NO_SCHEDULER_METRICS;
  const classes = new ClassCache();
  const workers = new WorkerSnapshot();
  const history = new TaskHistoryCache(config.statistics.heavyTaskSeconds);
  let timer: NodeJS.Timeout | null = null;
  let debounce: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;
  let again = false;
  let stopped = false;
  const streams: AsyncIterator<unknown>[] = [];

  const publish = (assignments: readonly Assignment[], via: AssignmentVia) => {
    if (assignments.length) metrics.assigned(assignments, via);
    for (const a of assignments) {
      events.publish('workAssigned', String(a.workerId), { workRequestId: a.workRequestId, workerId: a.workerId });
      events.publish('workRequestChanged', { id: a.workRequestId, workspaceId: a.workspaceId, status: 'ASSIGNED' });
    }
  };
  /** The shapes of the workers that pulled, for their next pulls in one round trip (next-work.ts). */
  const pullShapes = new PullShapes();
  const placing = new Set<Promise<NextAssignment[]>>();

  async function pass(reason: PassReason | 'manual' = 'manual'): Promise<Assignment[]> {
    // Most triggers (a worker connecting, work starting or finishing) come when nothing waits: one
    // probe of the pending index then spares loading and locking every connected worker. Work that
    // becomes pending after the probe triggers a pass of its own.
    const [{ pending }] = await orm.em
      .getConnection()
      .execute<{ pending: boolean }[]>(
        `select exists (select 1 from work_request where status = 'PENDING') as pending`,
      );
    if (!pending) return [];
    const assignments = await orm.em
      .fork()
      .transactional((tx) => runPass(tx, classes, history, config.workers, new Date()));
    metrics.passRan(reason);
    publish(assignments, 'pass'); // after the commit: a subscriber must find the row assigned
    if (assignments.length) log.debug({ assigned: assignments.length }, 'scheduling pass');
    return assignments;
  }

  async function sweep(now = new Date(), watchingSince: Date | null = null): Promise<number> {
    const { changes, settled, gone } = await orm.em.fork().transactional(async (tx) => {
      const changes = await expireLeases(tx, now, config.leases, watchingSince);
      const aborted = changes.filter((c) => c.status === 'ABORTED').map((c) => c.id);
      await forgetEndedBackoffs(tx, now);
      return {
        changes,
        settled: aborted.length ? await settleDependents(tx, aborted) : [],
        gone: await disconnectSilentWorkers(tx, changes, now, config.leases),
      };
    });
    // The pending counts' rows folded in a statement of its own (its row locks held for no longer).
    await compactPendingCounts(orm.em.fork());
    for (const w of gone) events.publish('workerChanged', w);
    for (const c of changes) events.publish('workRequestChanged', { id: c.id, workspaceId: c.workspaceId });
    for (const s of settled) events.publish('workRequestChanged', s);
    if (changes.length) {
      const counts = {
        requeued: changes.filter((c) => c.status === 'PENDING').length,
        aborted: changes.filter((c) => c.status === 'ABORTED').length,
      };
      log.warn({ ...counts, silentWorkersDisconnected: gone.map((w) => w.name) }, 'leases expired');
    }
    return changes.length;
  }

  async function probe(now = new Date()): Promise<Assignment[]> {
    if (!startProbes || config.workers.quarantineProbeMs <= 0) return [];
    const { started, skipped } = await orm.em.fork().transactional((tx) => startProbes(tx, now));
    // After the commit, as every assignment: the push (workAssigned) and the new request; the
    // worker's last probe changed too.
    for (const p of started) {
      events.publish('workAssigned', String(p.workerId), { workRequestId: p.workRequestId, workerId: p.workerId });
      events.publish('workRequestChanged', { id: p.workRequestId, workspaceId: p.workspaceId, status: 'ASSIGNED' });
      events.publish('workerChanged', { id: p.workerId, name: p.workerName });
    }
    if (started.length)
      log.info(
        { workers: started.map((p) => p.workerName), workRequestIds: started.map((p) => p.workRequestId) },
        'quarantine probes given',
      );
    for (const s of skipped) log.debug({ worker: s.workerName, why: s.why }, 'quarantined worker cannot be probed');
    return started;
  }

  function runSoon(reason: PassReason): void {
    if (stopped) return;
    if (running) {
      again = true; // one more pass after this one: it may have missed what triggered us
      return;
    }
    running = pass(reason)
      .catch((err: unknown) => log.error({ err, reason }, 'scheduling pass failed'))
      .finally(() => {
        running = null;
        if (again) {
          again = false;
          runSoon(reason);
        }
      });
  }

  return {
    classes,
    workers,
    history,
    async requestWork(workerId, options = {}) {
      const now = new Date();
      // One round trip when this process knows the worker's shape; else (or when that trip cannot
      // decide) the pull's transaction, which learns the shape for the next time.
      // A pull that waited for a lock longer than TAGSCHED_PULL_LOCK_TIMEOUT_MS (another transaction
      // holds the worker's row, or its host went silent holding it) answers no work now, as when nothing fits.
      const shape = pullShapes.get(workerId);
      let assignment: NextAssignment | null | undefined;
      try {
        assignment = shape
          ? await assignNextWorkInOneTrip(orm.em.fork(), classes, config.workers, workerId, shape, now, {
              seen: options.seen,
            })
          : undefined;
        if (assignment === undefined) {
          assignment = await orm.em.fork().transactional(async (tx) =>
            assignNextWork(tx, classes, config.workers, workerId, now, {
              seen: options.seen,
              shapes: pullShapes,
              durations: await history.get(tx, now),
            }),
          );
        }
      } catch (err) {
        if (!isLockTimeout(err)) throw err;
        log.debug(
          { workerId, lockTimeoutMs: config.workers.pullLockTimeoutMs },
          'pull waited too long for a lock: no work now',
        );
        return null;
      }
      if (assignment) publish([assignment], 'pull');
      return assignment;
    },
    async placeNew(request) {
      if (stopped || !config.scheduler.automatic) return [];
      // Each assignment is committed on its own and published at once, before the next worker is
      // tried; those made before a failure are answered too.
      const made: NextAssignment[] = [];
      const placed = placeRequest(orm.em.fork(), classes, history, config.workers, request, new Date(), (a) => {
        made.push(a);
        try {
          publish([a], 'place');
        } catch (err) {
          log.error({ err, workRequestId: a.workRequestId }, 'publishing a placement failed'); // the placement goes on
        }
      }).catch((err: unknown) => {
        log.error({ err, workRequestId: request.id }, 'placing a new request failed');
        this.trigger('new-pending'); // the pass will place it
        return made;
      });
      placing.add(placed);
      try {
        return await placed;
      } finally {
        placing.delete(placed);
      }
    },
    runPass: () => pass('manual'),
    sweepLeases: sweep,
    probeQuarantined: probe,
    trigger(reason) {
      if (debounce || stopped || !config.scheduler.automatic) return;
      debounce = setTimeout(() => {
        debounce = null;
        runSoon(reason);
      }, config.scheduler.passDebounceMs);
    },
    start() {
      if (!config.scheduler.automatic) return;
      // Any change of a worker (connected, reported, undrained, retagged) or of a request (new pending
      // work, work finished), in this process or, through PostgreSQL, in another, may allow assignments.
      // A change that cannot free a slot or add pending work (changeMayAllowAssignments) asks for none.
      // A change made in another process is that process's own to pass for (its subscription heard it
      // when it was published); among the others only the chores leader passes for it too, for a
      // process that stopped or failed before its pass. N processes then run at most two passes per
      // change, not N.
      const passesFor = (change: unknown): boolean =>
        !events.fromAnotherProcess?.(change) || (deps.leadsChores?.() ?? true);
      const workers = events.subscribe('workerChanged')[Symbol.asyncIterator]();
      const requests = events.subscribe('workRequestChanged')[Symbol.asyncIterator]();
      streams.push(workers, requests);
      void (async () => {
        for (let next = await workers.next(); !stopped && !next.done; next = await workers.next()) {
          if (passesFor(next.value)) this.trigger('worker-changed');
        }
      })();
      void (async () => {
        for (let next = await requests.next(); !stopped && !next.done; next = await requests.next()) {
          if (changeMayAllowAssignments(next.value) && passesFor(next.value)) this.trigger('new-pending');
        }
      })();
      // Leases are judged only on silence this process could have heard: see expireLeases.
      const startedAt = new Date();
      // The sweep and the probes in the process that does the chores; the periodic pass in every process.
      timer = setInterval(() => {
        const chores = deps.leadsChores?.() ?? true;
        (chores
          ? sweep(new Date(), startedAt)
              .catch((err: unknown) => log.error({ err }, 'lease sweep failed'))
              .then(() => probe())
              .catch((err: unknown) => log.error({ err }, 'quarantine probes failed'))
          : Promise.resolve()
        ).finally(() => runSoon('periodic'));
      }, config.scheduler.passIntervalMs);
      timer.unref();
      runSoon('startup');
    },
    async stop() {
      stopped = true;
      await Promise.all(streams.map((it) => it.return?.()));
      if (timer) clearInterval(timer);
      if (debounce) clearTimeout(debounce);
      await Promise.all([running, ...placing]);
    },
  };
}
