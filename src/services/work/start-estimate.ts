import type { EntityManager } from '@mikro-orm/postgresql';
import DataLoader from 'dataloader';
import {
  DIAGNOSIS_STATES,
  matchingWorkersOf,
  poolRoomNow,
  type Diagnosis,
  type PoolContext,
} from '../../scheduler/matching/diagnosis.js';
import type { PoolTemplate } from '../../scheduler/matching/pool-template.js';
import {
  medianOf,
  simulateStart,
  DEFAULT_LAUNCH_SECONDS,
  type EstimateLaunching,
  type EstimatePool,
  type SimulatedStart,
  type StartEstimate,
} from '../../scheduler/matching/start-estimate.js';
import type { WorkerState } from '../../scheduler/matching/worker-state.js';
import type { TaskHistory } from '../../scheduler/rules/heavy-work.js';
import { poolConcurrency } from '../../scheduler/rules/pool-capacity.js';
import {
  keepFirstEstimates,
  type ActiveRun,
  type AheadRun,
  type TaskRun,
} from '../../scheduler/storage/start-estimate.js';
import { DEFAULT_EXPECTED_SECONDS, expectedDurationSeconds } from '../../scheduler/storage/task-history.js';

/** What a start estimate reads through the operation's loaders, batched over the requests of an operation. */
export interface StartEstimateReads {
  /** The tasks ahead of a pending request in its class's queue, in order (runs of one task), at most SIMULATED_AHEAD. */
  readonly aheadRuns: Pick<DataLoader<number, AheadRun[]>, 'load'>;
  /** The active work of a worker. */
  readonly activeRuns: Pick<DataLoader<number, ActiveRun[]>, 'loadMany'>;
  /** The absolute errors kept for a class (newest last). */
  readonly estimateErrors: Pick<DataLoader<number, number[]>, 'load'>;
}

/** Keeps a request's first estimate (`estimated_start_at`, set once), resolving once it is written. */
export type FirstEstimateKeeper = (id: number, at: Date) => Promise<void>;

/**
 * The first estimates of one operation, kept in one statement for all the requests it estimates
 * together (keepFirstEstimates, scheduler/storage/start-estimate.ts); a request's first call wins.
 */
export function firstEstimateKeeper(em: EntityManager): FirstEstimateKeeper {
  const firsts = new Map<number, Date>();
  const keep = new DataLoader<number, null>(async (ids) => {
    await keepFirstEstimates(
      em,
      ids.map((id) => ({ id, at: firsts.get(id)! })),
    );
    return ids.map(() => null);
  });
  return async (id, at) => {
    if (!firsts.has(id)) firsts.set(id, at);
    await keep.load(id);
  };
}

/** The request estimated: what the estimate reads of it beside its tags. */
export interface EstimatedRequest {
  readonly id: number;
  readonly classId?: number | null;
  readonly estimatedStartAt?: Date | null;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/** What the estimate sees of the scheduler's state (the diagnosis read it already). */
export interface EstimateContext {
  readonly workers: readonly WorkerState[];
  readonly pools: readonly PoolTemplate[];
  readonly poolContext: PoolContext;
  readonly history: TaskHistory;
}

/**
 * When a pending request is expected to start (matching/start-estimate.ts simulates), read in a bounded
 * number of statements whatever the number of workers: the tasks of at most SIMULATED_AHEAD requests
 * ahead of it, the active work of its matching workers only, its class's kept errors. With `keep`, its
 * first estimate is kept on the request (`estimated_start_at`), whose error is recorded when it starts.
 * Expected runs are the task history's (expectedDurationSeconds: the default without history).
 */
export async function estimateStart(
  reads: StartEstimateReads,
  wr: EstimatedRequest,
  diagnosis: Diagnosis,
  context: EstimateContext,
  options: { keep?: FirstEstimateKeeper } = {},
): Promise<StartEstimate> {
  // Both at once, and both awaited together: a failure of either is the caller's, never unhandled.
  const [simulated, errors] = await Promise.all([
    simulate(reads, wr, diagnosis, context),
    wr.classId != null ? reads.estimateErrors.load(wr.classId) : Promise.resolve([]),
  ]);
  if (simulated.at && wr.estimatedStartAt == null && options.keep) await options.keep(wr.id, simulated.at);
  return { ...simulated, medianAbsoluteErrorSeconds: medianOf(errors), samples: errors.length };
}

async function simulate(
  reads: StartEstimateReads,
  wr: EstimatedRequest,
  diagnosis: Diagnosis,
  context: EstimateContext,
): Promise<SimulatedStart> {
  if (diagnosis.state === DIAGNOSIS_STATES.UNSCHEDULABLE) {
    return {
      at: null,
      waitSeconds: null,
      basis: 'nothing can ever run it: no worker and no pool matches (see the mismatches)',
      extrapolated: false,
    };
  }
  const { workers, poolContext, history } = context;
  const now = poolContext.now;
  const matchingPools = context.pools.filter((p) => diagnosis.matchingPools.includes(p.pool.name));
  const poolOf = new Map(context.pools.map((p) => [p.pool.id, p.pool]));
  const matching = matchingWorkersOf(wr, workers);
  const available = matching.filter((w) => !w.unavailable);
  const [ahead, active] = await Promise.all([
    diagnosis.queue && diagnosis.queue.ahead > 0 ? reads.aheadRuns.load(wr.id) : Promise.resolve([]),
    reads.activeRuns.loadMany(available.filter((w) => w.active > 0).map((w) => w.id)),
  ]);
  const activeOf = new Map(
    available
      .filter((w) => w.active > 0)
      .map((w, i) => [w.id, active[i] instanceof Error ? [] : (active[i] as ActiveRun[])]),
  );
  const measured = (poolId: number) => {
    const s = poolOf.get(poolId)?.launchSeconds; // a double precision column: the driver may give a string
    return s == null ? null : Number(s);
  };
  const launchSecondsOf = (poolId: number) => measured(poolId) ?? DEFAULT_LAUNCH_SECONDS;
  // Launching instances of the matching pools: their worker, when it is recorded, is a matching one that has not connected yet.
  const matchingIds = new Set(matching.map((w) => w.id));
  const launching: EstimateLaunching[] = poolContext.launching
    .filter(
      (i) => matchingPools.some((p) => p.pool.id === i.poolId) && (i.workerId === null || matchingIds.has(i.workerId)),
    )
    .map((i) => ({
      since: i.since,
      launchSeconds: launchSecondsOf(i.poolId),
      concurrency: poolConcurrency(poolOf.get(i.poolId)!.specifications),
    }));
  const pools: EstimatePool[] = matchingPools.map(({ pool }) => ({
    name: pool.name,
    launchSeconds: measured(pool.id),
    concurrency: poolConcurrency(pool.specifications),
    launchable: poolRoomNow(pool, workers, poolContext).launchable,
  }));
  const expected = (r: TaskRun) => expectedDurationSeconds(history, r.taskType, r.taskName);
  const result = simulateStart({
    now,
    workers: available.map((w) => ({
      concurrency: w.concurrency,
      busyUntil: (activeOf.get(w.id) ?? []).map((r) => new Date(r.since.getTime() + expected(r) * 1000)),
    })),
    launching,
    pools,
    ahead: diagnosis.queue?.ahead ?? 0,
    aheadSeconds: ahead.flatMap((run) => Array<number>(run.count).fill(expected(run))),
  });
  return result.at
    ? {
        ...result,
        basis: `${result.basis}; each run as long as its task's history says (${DEFAULT_EXPECTED_SECONDS} s without history)`,
      }
    : result;
}
