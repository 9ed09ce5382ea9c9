import { matchTags } from '../../core/tags/match.js';
import { isOrchestrated } from '../../core/tasks/types.js';
import type { UnavailableReason } from '../rules/availability.js';
import type { TaskTagsRow } from './candidates.js';
import { heaviness, type HeavyReason, type TaskHistory } from '../rules/heavy-work.js';
import {
  decidingRule,
  placementRules,
  workerPreference,
  placementFigures,
  type PlacementRule,
  type Preferable,
} from '../rules/placement-preference.js';
import type { QueuePosition } from '../rules/queue-order.js';
import type { PoolTemplate } from './pool-template.js';
import type { Backoff } from '../rules/release-backoff.js';
import { launchRoom, type LaunchLimit } from '../rules/pool-capacity.js';
import { groupBy, workerSignature, type WorkerState } from './worker-state.js';
import type { StartEstimate } from './start-estimate.js';
import { describeShortfall, resourceShortfalls, type Resources } from '../rules/resources.js';

/** Where a work request stands, as data. */
export const DIAGNOSIS_STATES = {
  /** Not PENDING: nothing to wait for (or it is BLOCKED on dependencies). */
  NOT_PENDING: 'NOT_PENDING',
  /** An available matching worker has a free slot: the next pass assigns it. */
  READY: 'READY',
  /** The matching workers with a free slot all released it recently: it waits for their release backoff to end. */
  WAITING_FOR_BACKOFF: 'WAITING_FOR_BACKOFF',
  /** Matching workers are available but all busy: it waits for capacity. */
  WAITING_FOR_CAPACITY: 'WAITING_FOR_CAPACITY',
  /** Matching workers exist but none is available (disconnected, draining, disabled). */
  WAITING_FOR_WORKERS: 'WAITING_FOR_WORKERS',
  /** No worker matches, but a pool could start one. */
  WAITING_FOR_PROVISIONING: 'WAITING_FOR_PROVISIONING',
  /**
   * No worker matches, and every matching pool is held by a limit (its outlook's `atLimit`:
   * rules/pool-capacity.ts): none may start one now. Only said with a pool context (a PENDING request's diagnosis).
   */
  WAITING_FOR_POOL_LIMIT: 'WAITING_FOR_POOL_LIMIT',
  /**
   * An internal or workflow task, whatever its status: the server runs it and no worker ever will (a
   * synchronization point completes when its dependencies have, a workflow runs through its children).
   */
  ORCHESTRATED: 'ORCHESTRATED',
  /** No worker and no pool could ever run it. */
  UNSCHEDULABLE: 'UNSCHEDULABLE',
} as const;
export type DiagnosisState = (typeof DIAGNOSIS_STATES)[keyof typeof DIAGNOSIS_STATES];

/** A group of workers (or one pool) that cannot run the request, and exactly why. */
export interface Mismatch {
  readonly pool: string | null;
  readonly workerCount: number;
  /** The first few worker names of the group (all of them for a pool: none). */
  readonly workerNames: string[];
  /** Every worker of the group (none for a pool): who may see the tags below depends on them. */
  readonly workerIds: number[];
  /** Tags the request requires that these workers do not provide. */
  readonly missingOnWorker: string[];
  /** Tags these workers require that the request does not provide. */
  readonly missingOnTask: string[];
}

/** A matching worker the request is not offered to until `until`: it released it (release-backoff.ts). */
export interface BackedOff {
  readonly workerName: string;
  readonly until: Date;
}

/** Which free worker a pending request would go to, and the rules that decide it (docs/design.md: placement quality, placement-preference.ts). */
export interface PlacementView {
  readonly heavy: boolean;
  readonly heavyReason: HeavyReason | null;
  /** Its task's average run over the last 30 days, in seconds; null without history (or with the history rule off). */
  readonly averageSeconds: number | null;
  /** The average from which a task is heavy work (TAGSCHED_HEAVY_TASK_SECONDS); 0: off. */
  readonly thresholdSeconds: number;
  /** The rules that order the free workers for it, in the order they apply. */
  readonly rules: readonly PlacementRule[];
  /** The first few free workers that may take it, in order of preference: the first gets it. */
  readonly preferredWorkers: string[];
  /** The rule that put the first of them before the second; null with fewer than two. */
  readonly decidedBy: PlacementRule | null;
}

/** What the placement part of a diagnosis needs beside the workers: the task history and each worker's number of eligible classes. */
export interface PlacementContext {
  readonly history: TaskHistory;
  /** How many task classes the worker may run (the specialised go first: ClassCache.eligibleFor). */
  readonly eligibleCount: (w: WorkerState) => number;
}

/** An instance asked of its provider whose worker has not connected yet (storage/launching-instances.ts). */
export interface LaunchingInstance {
  readonly name: string;
  readonly poolId: number;
  readonly workerId: number | null;
  readonly since: Date;
}

/**
 * Why a matching worker gets no work now, as a diagnosis counts it: the availability rule's reason, or
 * LAUNCHING for the worker of an instance still booting (the rule sees it as disconnected).
 */
export type DiagnosisUnavailableReason = UnavailableReason | 'LAUNCHING';

/** A matching pool as the diagnosis sees it: whether it could start a worker for the request now, and what it is launching. */
export interface PoolOutlook {
  readonly pool: string;
  /** Its workers not yet terminated (launching ones included), as demand counts them. */
  readonly instances: number;
  readonly maxActiveInstances: number;
  /** Its instances still launching, oldest first. */
  readonly launching: readonly { name: string; since: Date }[];
  /** What keeps it from starting another now (rules/pool-capacity.ts); empty exactly when it may launch one (`launchable` > 0). */
  readonly atLimit: LaunchLimit[];
}

/** What the pools' part of a diagnosis needs beside the templates: their launching instances, runtime and health settings. */
export interface PoolContext {
  readonly launching: readonly LaunchingInstance[];
  /** Each pool's runtime this month, in seconds, by pool id. */
  readonly runtime: ReadonlyMap<number, number>;
  /** Each pool's instances' cost this month, by pool id; none when absent. */
  readonly cost?: ReadonlyMap<number, number>;
  /** Each pool's committed cost this month, what its cost budget limits (storage/pool-runtime.ts), by pool id; `cost` when absent. */
  readonly committed?: ReadonlyMap<number, number>;
  /** Each pool's launches in the last minute (storage/pool-launches.ts), by pool id, for its rate limit; none when absent. */
  readonly launchesLastMinute?: ReadonlyMap<number, number>;
  readonly degradedAfterFailures: number;
  readonly now: Date;
}

/** A matching pool's room to launch now (rules/pool-capacity.ts), as demand computes it, from what `context` read: the diagnosis's and the start estimate's one call. */
export function poolRoomNow(pool: PoolTemplate['pool'], workers: readonly WorkerState[], context: PoolContext) {
  return launchRoom(
    pool,
    workers.filter((w) => w.poolId === pool.id).length,
    context.runtime.get(pool.id) ?? 0,
    context.now,
    context.degradedAfterFailures,
    context.launchesLastMinute?.get(pool.id) ?? 0,
    context.committed?.get(pool.id) ?? context.cost?.get(pool.id) ?? 0,
  );
}

/** A matching worker that shares its resources, as a diagnosis sees it. */
export interface HostView {
  readonly offered: Resources;
  readonly free: Resources;
  /** The pending request it is held for, and when that one is expected to fit; null when none. */
  readonly heldFor: { readonly workRequestId: number; readonly startsAt: Date } | null;
}

/** What a diagnosis needs to judge the workers that share their resources: what the request reserves, and those workers by id. */
export interface ResourceContext {
  readonly request: Resources;
  readonly hosts: ReadonlyMap<number, HostView>;
}

/** A matching worker with a free slot that has no room for the request now: why, in words (rules/resources.ts). */
export interface ResourceWait {
  readonly workerName: string;
  /** `needs 16 GiB of memory; build-7 has 6 GiB free of 64`, or whom the worker is held for. */
  readonly reasons: string[];
}

/** Why a request waits. */
export interface Diagnosis {
  readonly state: DiagnosisState;
  readonly matchingWorkers: number;
  readonly availableWorkers: number;
  readonly busyWorkers: number;
  readonly unavailableWorkers: { reason: DiagnosisUnavailableReason; count: number }[];
  readonly matchingPools: string[];
  /** The matching pools with their room to launch and their launching instances; empty without a pool context. */
  readonly pools: PoolOutlook[];
  readonly mismatches: Mismatch[];
  /** Matching workers it is backed off from: free ones are not counted as available. */
  readonly releaseBackoffs: BackedOff[];
  /** Matching workers that share their resources, with a free slot but no room for it now (counted as busy), and why. */
  readonly resourceWaits: ResourceWait[];
  /** For a PENDING request diagnosed with a placement context: which free worker it would go to, and why. */
  readonly placement: PlacementView | null;
  /** For a PENDING request: how many of its class are ahead of it in the queue, and why (queue-position.ts; filled in by the caller). */
  readonly queue: QueuePosition | null;
  /** For a PENDING request: when it is expected to start, and how far off such estimates were (services/work/start-estimate.ts; filled in by the caller). */
  readonly startEstimate: StartEstimate | null;
}

const NAMES_PER_GROUP = 10;
/** Free workers a diagnosis names in order of preference. */
export const PREFERRED_SHOWN = 5;

const ORCHESTRATED: Diagnosis = {
  state: DIAGNOSIS_STATES.ORCHESTRATED,
  matchingWorkers: 0,
  availableWorkers: 0,
  busyWorkers: 0,
  unavailableWorkers: [],
  matchingPools: [],
  pools: [],
  mismatches: [],
  releaseBackoffs: [],
  resourceWaits: [],
  placement: null,
  queue: null,
  startEstimate: null,
};

/** The free workers a request may go to (matching, not backed off), in order of preference, and the rules that ordered them. */
function placementOf(
  task: { requiredTags: readonly string[]; taskType: string; taskName: string },
  free: readonly WorkerState[],
  context: PlacementContext,
): PlacementView {
  const h = heaviness(task.requiredTags, task.taskType, task.taskName, context.history);
  const ranked = free
    .map((w): Preferable & { name: string } => ({
      id: w.id,
      name: w.name,
      pooled: w.poolId !== null,
      ...placementFigures(w.providedTags),
      eligible: context.eligibleCount(w),
    }))
    .sort(workerPreference(h.heavy));
  return {
    heavy: h.heavy,
    heavyReason: h.reason,
    averageSeconds: h.averageSeconds,
    thresholdSeconds: context.history.thresholdSeconds,
    rules: placementRules(h.heavy),
    preferredWorkers: ranked.slice(0, PREFERRED_SHOWN).map((w) => w.name),
    decidedBy: ranked.length >= 2 ? decidingRule(h.heavy, ranked[0], ranked[1]) : null,
  };
}

/** Whether a worker whose tags match (`tagsMatch`) may run the request: any type but `not-assignable`. */
const runsOn = (tagsMatch: boolean, w: Pick<WorkerState, 'type'>) => tagsMatch && w.type !== 'not-assignable';

/** The workers that may run a request (the diagnosis's matching workers), decided once per group of workers with equal tags. */
export function matchingWorkersOf(
  task: Pick<TaskTagsRow, 'providedTags' | 'requiredTags'>,
  workers: readonly WorkerState[],
): WorkerState[] {
  const taskSets = { provided: task.providedTags, required: task.requiredTags };
  const out: WorkerState[] = [];
  for (const group of groupBy(workers, workerSignature).values()) {
    if (runsOn(matchTags(taskSets, { provided: group[0].providedTags, required: group[0].requiredTags }).ok, group[0]))
      out.push(...group);
  }
  return out;
}

/**
 * Diagnoses one request against every worker (grouped by tag signature) and every enabled pool; an
 * orchestrated one (internal, workflow) against none, since no worker is ever meant to run it.
 * `backoffs` are the request's release backoffs in force (release-backoff.ts); with a `placement`
 * context a PENDING request also gets its placement (which free worker first, and why). The queue
 * position needs the database: the caller fills it in (queue-position.ts). With a `poolContext` the
 * matching pools are described (could each start a worker, or which limit holds it, and what it is
 * launching) and the workers of launching instances are counted as LAUNCHING, not as disconnected.
 */
export function diagnose(
  task: TaskTagsRow & { status: string; taskType: string; taskName: string },
  workers: readonly WorkerState[],
  pools: readonly PoolTemplate[],
  backoffs: readonly Backoff[] = [],
  placement?: PlacementContext,
  poolContext?: PoolContext,
  resources?: ResourceContext,
): Diagnosis {
  if (isOrchestrated(task.taskType)) return ORCHESTRATED;
  const taskSets = { provided: task.providedTags, required: task.requiredTags };
  const mismatches: Mismatch[] = [];
  const matching: WorkerState[] = [];
  for (const group of groupBy(workers, workerSignature).values()) {
    const m = matchTags(taskSets, { provided: group[0].providedTags, required: group[0].requiredTags });
    if (runsOn(m.ok, group[0])) matching.push(...group);
    else if (!m.ok) {
      mismatches.push({
        pool: null,
        workerCount: group.length,
        workerNames: group.slice(0, NAMES_PER_GROUP).map((w) => w.name),
        workerIds: group.map((w) => w.id),
        missingOnWorker: m.missingOnWorker,
        missingOnTask: m.missingOnTask,
      });
    }
  }
  const matchingPools: string[] = [];
  for (const p of pools) {
    const m = matchTags(taskSets, { provided: p.providedTags, required: p.requiredTags });
    if (m.ok) matchingPools.push(p.pool.name);
    else
      mismatches.push({
        pool: p.pool.name,
        workerCount: 0,
        workerNames: [],
        workerIds: [],
        missingOnWorker: m.missingOnWorker,
        missingOnTask: m.missingOnTask,
      });
  }
  mismatches.sort(
    (a, b) =>
      a.missingOnWorker.length + a.missingOnTask.length - (b.missingOnWorker.length + b.missingOnTask.length) ||
      b.workerCount - a.workerCount,
  );
  const untilOf = new Map(backoffs.map((b) => [b.workerId, b.until]));
  const releaseBackoffs = matching
    .filter((w) => untilOf.has(w.id))
    .map((w) => ({ workerName: w.name, until: untilOf.get(w.id)! }));
  // A worker that shares its resources has room when the request fits in what it has free, and it is not
  // held for another request (host-choice.ts may still backfill it there: the diagnosis does not promise it).
  const waits = new Map<number, string[]>();
  for (const w of matching) {
    const host = resources?.hosts.get(w.id);
    if (!host || w.free === 0 || w.unavailable) continue;
    const reasons = resourceShortfalls(resources!.request, host.free, host.offered).map((s) =>
      describeShortfall(w.name, s),
    );
    if (host.heldFor && host.heldFor.workRequestId !== task.id)
      reasons.push(
        `${w.name} is held for work request ${host.heldFor.workRequestId}, expected to fit at ${host.heldFor.startsAt.toISOString()}: it takes only work that does not delay it`,
      );
    if (reasons.length) waits.set(w.id, reasons);
  }
  const hasRoom = (w: WorkerState) => w.free > 0 && !waits.has(w.id);
  const free = matching.filter((w) => hasRoom(w) && !untilOf.has(w.id));
  const available = free.length;
  const backedOff = matching.some((w) => hasRoom(w) && untilOf.has(w.id));
  const busy = matching.filter((w) => !w.unavailable && !hasRoom(w)).length;
  const resourceWaits = matching
    .filter((w) => waits.has(w.id))
    .slice(0, NAMES_PER_GROUP)
    .map((w) => ({ workerName: w.name, reasons: waits.get(w.id)! }));
  const launchingWorkers = new Set((poolContext?.launching ?? []).map((i) => i.workerId));
  const reasonOf = (w: WorkerState): DiagnosisUnavailableReason =>
    w.unavailable === 'DISCONNECTED' && launchingWorkers.has(w.id) ? 'LAUNCHING' : w.unavailable!;
  const unavailable = [
    ...groupBy(
      matching.filter((w) => w.unavailable),
      reasonOf,
    ).entries(),
  ].map(([reason, list]) => ({
    reason: reason as DiagnosisUnavailableReason,
    count: list.length,
  }));
  // The matching pools' outlook, with the room-to-launch rule demand and the start estimate use.
  const poolOutlooks = poolContext
    ? outlooks(
        pools.filter((p) => matchingPools.includes(p.pool.name)),
        workers,
        poolContext,
      )
    : [];
  let state: DiagnosisState;
  if (task.status !== 'PENDING') state = DIAGNOSIS_STATES.NOT_PENDING;
  else if (available) state = DIAGNOSIS_STATES.READY;
  else if (backedOff) state = DIAGNOSIS_STATES.WAITING_FOR_BACKOFF;
  else if (busy) state = DIAGNOSIS_STATES.WAITING_FOR_CAPACITY;
  else if (matching.length) state = DIAGNOSIS_STATES.WAITING_FOR_WORKERS;
  else if (matchingPools.length) {
    const held = poolContext !== undefined && poolOutlooks.every((o) => o.atLimit.length > 0);
    state = held ? DIAGNOSIS_STATES.WAITING_FOR_POOL_LIMIT : DIAGNOSIS_STATES.WAITING_FOR_PROVISIONING;
  } else state = DIAGNOSIS_STATES.UNSCHEDULABLE;
  return {
    state,
    matchingWorkers: matching.length,
    availableWorkers: available,
    busyWorkers: busy,
    unavailableWorkers: unavailable,
    matchingPools,
    pools: poolOutlooks,
    mismatches,
    releaseBackoffs,
    resourceWaits,
    placement: placement && task.status === 'PENDING' ? placementOf(task, free, placement) : null,
    queue: null,
    startEstimate: null,
  };
}

/** The matching pools' outlook: the same room-to-launch rule as demand's, and their launching instances. */
function outlooks(
  pools: readonly PoolTemplate[],
  workers: readonly WorkerState[],
  context: PoolContext,
): PoolOutlook[] {
  return pools.map(({ pool }) => {
    const instances = workers.filter((w) => w.poolId === pool.id).length;
    const room = poolRoomNow(pool, workers, context);
    return {
      pool: pool.name,
      instances,
      maxActiveInstances: pool.maxActiveInstances,
      launching: context.launching.filter((i) => i.poolId === pool.id).map((i) => ({ name: i.name, since: i.since })),
      atLimit: room.atLimit,
    };
  });
}
