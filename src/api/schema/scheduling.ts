import { builder } from '../builder.js';
import { describedValues } from './enum-values.js';
import { costOf, FIELD_COSTS, fixedCost } from '../limits/cost.js';
import { LIST_MAXIMA } from '../limits/list-bounds.js';
import { firstDescription, firstOf } from './pagination.js';
import type { Context } from '../context.js';
import { canSeeWorkerGroupTags, principalOf } from '../../services/identity/visibility.js';
import { diagnoseRequest } from '../../services/work/diagnose-request.js';
import { visibleTaskTags } from '../../services/work/work-request-reads.js';
import { demandSeenBy } from '../../services/pools/pool-reads.js';
import {
  LAUNCH_LIMITS,
  type PoolDemand,
  type ProvisioningDemand,
  type UnschedulableGroup,
} from '../../scheduler/matching/demand-plan.js';
import {
  DIAGNOSIS_STATES,
  type BackedOff,
  type ResourceWait,
  type Diagnosis,
  type DiagnosisUnavailableReason,
  type Mismatch,
  type PoolOutlook,
} from '../../scheduler/matching/diagnosis.js';
import type { WorkerState } from '../../scheduler/matching/worker-state.js';
import type { StartEstimate } from '../../scheduler/matching/start-estimate.js';
import { PlacementRef, QueuePositionRef } from './placement.js';
import { WorkRequestRef } from './work-request.js';
import { WorkerRef } from './worker.js';
import { ResourcePlanRef } from './resources.js';
import { poolOfferingStates, PoolOfferingRef, WorkerPoolRef } from './worker-pool.js';

const DiagnosisStateEnum = builder.enumType('DiagnosisState', {
  description: 'Why a work request waits, in one word',
  values: describedValues<(typeof DIAGNOSIS_STATES)[keyof typeof DIAGNOSIS_STATES]>({
    NOT_PENDING: 'It is not PENDING: nothing to wait for (or it is BLOCKED on its dependencies)',
    READY: 'An available matching worker has a free slot: the next pass assigns it',
    WAITING_FOR_BACKOFF:
      'The matching workers with a free slot all released it recently: it waits for their release backoff to end',
    WAITING_FOR_CAPACITY: 'Matching workers are available but all busy',
    WAITING_FOR_WORKERS: 'Matching workers exist but none is available (disconnected, draining, disabled)',
    WAITING_FOR_PROVISIONING: 'No worker matches, but a pool could start one',
    WAITING_FOR_POOL_LIMIT:
      'No worker matches, and every matching pool is held by a limit (see pools: atLimit): none may start one now',
    ORCHESTRATED: 'The server runs it (an internal or workflow task); no worker ever will',
    UNSCHEDULABLE: 'No worker and no pool could ever run it: see mismatches for the missing tags',
  }),
});
const UnavailableEnum = builder.enumType('UnavailableReason', {
  description: 'Why a matching worker gets no new work now',
  values: describedValues<DiagnosisUnavailableReason>({
    LAUNCHING:
      'The worker of a pool instance still booting: its agent has not connected yet (in a diagnosis; a worker status says DISCONNECTED)',
    NOT_ASSIGNABLE: 'A worker of type not-assignable: the scheduler never gives it work',
    INACTIVE: 'Terminated',
    DISABLED: 'Disabled by an admin',
    DISCONNECTED: 'Its agent is not connected',
    STALE: 'Connected, but its metadata is missing or older than TAGSCHED_METADATA_FRESH_SECONDS',
    QUARANTINED: 'Its recent results are errors while the same tasks succeed elsewhere',
    DRAINING: 'Drained by an admin',
    SHUTTING_DOWN: 'Its agent is shutting down',
  }),
});
const LaunchLimitEnum = builder.enumType('LaunchLimit', {
  description: 'What keeps a pool from starting all the instances its demand asks for',
  values: describedValues<(typeof LAUNCH_LIMITS)[keyof typeof LAUNCH_LIMITS]>({
    MAX_ACTIVE_INSTANCES: 'It runs maxActiveInstances already',
    MONTHLY_BUDGET: 'Its instances used monthlyRuntimeBudgetSeconds this month',
    COST_BUDGET: 'Its instances’ cost this month (monthCost) reached its monthlyCostBudget',
    BACKOFF: 'Its last launches failed: it waits (launchRetryAt) before trying again',
    RATE_LIMIT: 'It launched its maxLaunchesPerMinute in the last minute',
  }),
});

/** A mismatch's missing tags, or null when they are tags of workers the viewer may not see the details of (services/identity/visibility.ts). */
const missingTags =
  (side: 'missingOnWorker' | 'missingOnTask') =>
  (m: Pick<Mismatch, 'workerIds' | typeof side>, _a: unknown, ctx: Context) =>
    canSeeWorkerGroupTags(principalOf(ctx.viewer), m.workerIds) ? m[side] : null;

const HIDDEN =
  " (null when the viewer may not see these workers' tags: anonymous callers and other workers; the count is always there)";

const MismatchRef = builder.objectRef<Mismatch>('TagMismatch').implement({
  description: 'A group of workers with the same tags, or a pool, that cannot run the request, and why',
  fields: (t) => ({
    pool: t.exposeString('pool', {
      nullable: true,
      description: 'The pool, for a pool template; null for a group of workers',
    }),
    workerCount: t.exposeInt('workerCount', { description: 'How many workers the group holds (0 for a pool)' }),
    workerNames: t.exposeStringList('workerNames', { description: 'The first few workers of the group' }),
    missingOnWorker: t.stringList({
      nullable: true,
      description: `Tags the request requires that these workers do not provide${HIDDEN}`,
      resolve: missingTags('missingOnWorker'),
    }),
    missingOnTask: t.stringList({
      nullable: true,
      description: `Tags these workers require that the request does not provide${HIDDEN}`,
      resolve: missingTags('missingOnTask'),
    }),
    missingOnWorkerCount: t.int({
      description: 'How many tags the request requires that these workers do not provide',
      resolve: (m) => m.missingOnWorker.length,
    }),
    missingOnTaskCount: t.int({
      description: 'How many tags these workers require that the request does not provide',
      resolve: (m) => m.missingOnTask.length,
    }),
  }),
});

const PoolOutlookRef = builder.objectRef<PoolOutlook>('PoolOutlook').implement({
  description:
    'A pool that could run a pending request: its room to launch, as demand counts it, and what it is launching',
  fields: (t) => ({
    pool: t.exposeString('pool', { description: "The pool's name" }),
    instances: t.exposeInt('instances', { description: 'Its instances not yet terminated, launching ones included' }),
    maxActiveInstances: t.exposeInt('maxActiveInstances', { description: 'How many it may have at once' }),
    atLimit: t.field({
      type: [LaunchLimitEnum],
      description: 'What keeps it from starting another worker now; empty when it could',
      resolve: (o) => o.atLimit,
    }),
    launching: t.field({
      type: [
        builder.objectRef<{ name: string; since: Date }>('LaunchingInstance').implement({
          description: 'An instance asked of its provider whose worker has not connected yet',
          fields: (f) => ({
            name: f.exposeString('name', { description: "The instance's (and its worker's) name" }),
            since: f.field({ type: 'DateTime', description: 'When it was launched', resolve: (i) => i.since }),
          }),
        }),
      ],
      description: 'Its instances still launching, oldest first',
      resolve: (o) => o.launching,
    }),
  }),
});

const StartEstimateRef = builder.objectRef<StartEstimate>('StartEstimate').implement({
  description:
    'When a pending work request is expected to start: the requests of its class ahead of it, then itself, served in order by the slot that frees first (matching workers, launching workers, pools with room), each for its task\u2019s expected run; with how far off the last estimates of its class were',
  fields: (t) => ({
    at: t.field({
      type: 'DateTime',
      nullable: true,
      description: 'When it is expected to start; null when nothing could run it now (see basis)',
      resolve: (e) => e.at,
    }),
    waitSeconds: t.float({
      nullable: true,
      description: 'Seconds from now until then; null with `at`',
      resolve: (e) => e.waitSeconds,
    }),
    basis: t.exposeString('basis', {
      description:
        'How it was computed (the requests simulated, the slots, the launch times), or why there is no estimate',
    }),
    extrapolated: t.exposeBoolean('extrapolated', {
      description: 'Whether the requests ahead beyond the first 1,000 were extrapolated rather than simulated',
    }),
    medianAbsoluteErrorSeconds: t.float({
      nullable: true,
      description:
        'The median of |started \u2212 estimated| over the last estimates of its class (at most 100), in seconds; null before any of its class started',
      resolve: (e) => e.medianAbsoluteErrorSeconds,
    }),
    samples: t.exposeInt('samples', { description: 'How many started requests of its class that median is of' }),
  }),
});

const DiagnosisRef = builder.objectRef<Diagnosis>('Diagnosis').implement({
  description: 'Why a work request waits, as data',
  fields: (t) => ({
    state: t.field({ type: DiagnosisStateEnum, description: 'Why it waits, in one word', resolve: (d) => d.state }),
    matchingWorkers: t.exposeInt('matchingWorkers', { description: 'Workers whose tags match, available or not' }),
    availableWorkers: t.exposeInt('availableWorkers', { description: 'Matching workers with a free slot now' }),
    busyWorkers: t.exposeInt('busyWorkers', { description: 'Matching workers that are available but full' }),
    unavailableWorkers: t.field({
      type: [
        builder.objectRef<{ reason: string; count: number }>('UnavailableCount').implement({
          description: 'How many matching workers are unavailable for one reason',
          fields: (f) => ({
            reason: f.field({
              type: UnavailableEnum,
              description: 'Why they get no work now',
              resolve: (u) => u.reason as DiagnosisUnavailableReason,
            }),
            count: f.exposeInt('count', { description: 'How many workers' }),
          }),
        }),
      ],
      description: 'Matching workers that get no work now, counted by reason',
      resolve: (d) => d.unavailableWorkers,
    }),
    matchingPools: t.exposeStringList('matchingPools', { description: 'Pools whose template tags could run it' }),
    pools: t.field({
      type: [PoolOutlookRef],
      description:
        'The matching pools: whether each could start a worker for it now or which limit holds it, and the instances it is launching; empty unless it is PENDING',
      resolve: (d) => d.pools,
    }),
    mismatches: t.field({ type: [MismatchRef], description: 'Nearest first', resolve: (d) => d.mismatches }),
    releaseBackoffs: t.field({
      type: [
        builder.objectRef<BackedOff>('ReleaseBackoff').implement({
          description: 'A matching worker that released the request: it is not offered to it again before `until`',
          fields: (f) => ({
            workerName: f.exposeString('workerName', { description: 'The worker' }),
            until: f.field({
              type: 'DateTime',
              description: 'When it may be offered the request again',
              resolve: (b) => b.until,
            }),
          }),
        }),
      ],
      description:
        'Matching workers that released it recently (TAGSCHED_RELEASE_BACKOFF_SECONDS); free ones do not count as available',
      resolve: (d) => d.releaseBackoffs,
    }),
    resourceWaits: t.field({
      type: [
        builder.objectRef<ResourceWait>('ResourceWait').implement({
          description:
            'A matching worker that shares its resources, with a free slot but no room for the request now (docs/reference/resources.md)',
          fields: (f) => ({
            workerName: f.exposeString('workerName', { description: 'The worker' }),
            reasons: f.exposeStringList('reasons', {
              description:
                'Why, in words: `needs 16 GiB of memory; build-7 has 6 GiB free of 64`, or the request it is held for',
            }),
          }),
        }),
      ],
      description: 'Matching workers that share their resources and have no room for it now (counted as busy)',
      resolve: (d) => d.resourceWaits,
    }),
    placement: t.field({
      type: PlacementRef,
      nullable: true,
      description:
        'Which free worker it would go to and the rules that decide it, whether it is heavy work and why; null unless it is PENDING on workers',
      resolve: (d) => d.placement,
    }),
    queue: t.field({
      type: QueuePositionRef,
      nullable: true,
      description:
        'Where it stands among the pending requests of its class, and why those ahead are; null unless it is PENDING on workers',
      resolve: (d) => d.queue,
    }),
    startEstimate: t.field({
      type: StartEstimateRef,
      nullable: true,
      description:
        'When it is expected to start, and how far off such estimates of its class were; null unless it is PENDING (its first estimate is kept to measure that error)',
      resolve: (d) => d.startEstimate,
    }),
  }),
});

const workerIds = (list: WorkerState[], first: number) => list.slice(0, first).map((w) => w.id);

builder.objectFields(WorkRequestRef, (t) => ({
  candidateWorkers: t.field({
    type: [WorkerRef],
    description: 'The workers that could run it (batched: a list of requests costs a bounded number of statements)',
    args: {
      availableOnly: t.arg.boolean({
        defaultValue: true,
        description:
          'Only workers that may take work now (connected, enabled, not draining; one that shares its resources with room for it now)',
      }),
      first: t.arg.int({ defaultValue: 100, description: firstDescription('WorkRequest.candidateWorkers', 'workers') }),
    },
    resolve: async (wr, args, ctx) => {
      const first = firstOf('WorkRequest.candidateWorkers', args.first);
      return workerIds(await ctx.loaders.candidates(args.availableOnly ?? true).load(wr.id), first);
    },
  }),
  diagnosis: t.field({
    type: DiagnosisRef,
    description: 'Why it waits: per group of workers and per pool, the missing tags on each side',
    extensions: costOf(fixedCost(FIELD_COSTS.diagnosis)),
    resolve: (wr, _a, ctx) => diagnoseRequest(ctx.loaders, wr, { keep: ctx.keepFirstEstimate }),
  }),
}));

interface Candidates {
  workRequestId: number;
  workers: WorkerState[];
}

const CandidatesRef = builder.objectRef<Candidates>('WorkRequestCandidates').implement({
  description: 'The workers that could run one work request',
  fields: (t) => ({
    workRequestId: t.id({ description: 'The work request', resolve: (c) => String(c.workRequestId) }),
    count: t.int({ description: 'How many workers could run it', resolve: (c) => c.workers.length }),
    workerNames: t.stringList({
      description: 'Their names',
      args: {
        first: t.arg.int({
          defaultValue: 100,
          description: firstDescription('WorkRequestCandidates.workerNames', 'names'),
        }),
      },
      resolve: (c, a) => c.workers.slice(0, firstOf('WorkRequestCandidates.workerNames', a.first)).map((w) => w.name),
    }),
    workers: t.field({
      type: [WorkerRef],
      description: 'The workers',
      args: {
        first: t.arg.int({
          defaultValue: 100,
          description: firstDescription('WorkRequestCandidates.workers', 'workers'),
        }),
      },
      resolve: (c, a) => workerIds(c.workers, firstOf('WorkRequestCandidates.workers', a.first)),
    }),
  }),
});

/**
 * The requested ids the viewer may see, in the order they were asked for, in one statement that also
 * reads their tags for the candidates (the loaders keep them for the operation).
 */
async function visibleIds(ctx: Context, ids: number[]): Promise<number[]> {
  if (!ids.length) return [];
  const tasks = await visibleTaskTags(ctx.em, ctx.viewer, ids);
  for (const task of tasks) ctx.loaders.taskTags.prime(task.id, task);
  const ok = new Set(tasks.map((t) => t.id));
  return ids.filter((id) => ok.has(id));
}

const PoolDemandRef = builder.objectRef<PoolDemand>('PoolDemand').implement({
  description: "One pool's part of the demand: what it should start and stop now",
  fields: (t) => ({
    pool: t.field({ type: WorkerPoolRef, description: 'The pool', resolve: (d) => d.pool }),
    resourcePlan: t.field({
      type: ResourcePlanRef,
      nullable: true,
      description:
        'For a pool whose machines share their resources, how its requests were packed onto its machine size (its workersRequired); null for a pool with slots',
      resolve: (d) => d.resourcePlan,
    }),
    pendingRunnable: t.exposeInt('pendingRunnable', { description: 'Pending requests its template tags can run' }),
    pendingAssigned: t.exposeInt('pendingAssigned', {
      description: 'Of those, the ones left for this pool after idle capacity and earlier pools',
    }),
    comingRunnable: t.exposeInt('comingRunnable', {
      description:
        'Coming work its template tags can run: BLOCKED requests whose dependencies are all running or completed, one at least still running',
    }),
    comingAssigned: t.exposeInt('comingAssigned', {
      description:
        'Of those, the ones left for this pool after idle capacity, pending work and earlier pools; it launches for them too, to be ready when they are queued',
    }),
    idleCompatibleSlots: t.exposeInt('idleCompatibleSlots', {
      description: 'Free slots of available workers that can run what this pool can run',
    }),
    averageTaskSeconds: t.exposeFloat('averageTaskSeconds', {
      description: 'How long its kind of work takes, on average (seconds)',
    }),
    workersRequired: t.exposeInt('workersRequired', {
      description: 'Instances needed to serve its share within the target latency',
    }),
    activeInstances: t.exposeInt('activeInstances', { description: 'Instances it runs now (launching or running)' }),
    startingInstances: t.exposeInt('startingInstances', { description: 'Instances created but not connected yet' }),
    launch: t.exposeInt('launch', { description: 'Instances to start now, within the limits' }),
    limitedBy: t.field({
      type: [LaunchLimitEnum],
      description: 'What keeps launch below what the demand asks; empty when nothing does',
      resolve: (d) => d.limitedBy,
    }),
    monthRuntimeSeconds: t.exposeFloat('monthRuntimeSeconds', {
      description: 'Its instances’ runtime this month (UTC), against monthlyRuntimeBudgetSeconds',
    }),
    monthCost: t.exposeFloat('monthCost', {
      description:
        'Its instances’ cost this month (UTC), in the currency of its prices, against monthlyCostBudget; 0 without prices',
    }),
    degraded: t.exposeBoolean('degraded', { description: 'Its launches keep failing; lastError says why' }),
    lastError: t.string({
      nullable: true,
      description: 'The pool’s last provider error',
      resolve: (d) => d.pool.lastError ?? null,
    }),
    unavailableOfferings: t.field({
      type: [PoolOfferingRef],
      description:
        'Its offerings that launches skip now (after a capacity or quota failure), with until when and why; when all are, its launches fail',
      resolve: async (d, _a, ctx) =>
        (await poolOfferingStates(d.pool, (id) => ctx.loaders.offeringMarks.load(id))).filter(
          (o) => o.unavailableUntil !== null,
        ),
    }),
    stopWorkers: t.field({
      type: [WorkerRef],
      description: `Pool workers to stop: those that retired (maxWorkRequestsPerInstance, maxInstanceLifetimeSeconds, a rollout) and hold no work, at once, then idle ones past the idle timeout; the first ${LIST_MAXIMA.stopWorkersShown} of them (the provisioner itself stops them all)`,
      resolve: (d) => d.stop.slice(0, LIST_MAXIMA.stopWorkersShown).map((w) => w.id),
    }),
  }),
});

const NearestRef = builder.objectRef<UnschedulableGroup['nearest'][number]>('NearestMatch').implement({
  description: 'A group of workers, or a pool, that comes near to running unschedulable work, and what is missing',
  fields: (t) => ({
    pool: t.exposeString('pool', { nullable: true, description: 'The pool; null for a group of workers' }),
    workerNames: t.exposeStringList('workerNames', { description: 'The first few workers of the group' }),
    missingOnWorker: t.stringList({
      nullable: true,
      description: `Tags the requests require that these workers do not provide${HIDDEN}`,
      resolve: missingTags('missingOnWorker'),
    }),
    missingOnTask: t.stringList({
      nullable: true,
      description: `Tags these workers require that the requests do not provide${HIDDEN}`,
      resolve: missingTags('missingOnTask'),
    }),
    missingOnWorkerCount: t.int({
      description: 'How many tags the requests require that these workers do not provide',
      resolve: (m) => m.missingOnWorker.length,
    }),
    missingOnTaskCount: t.int({
      description: 'How many tags these workers require that the requests do not provide',
      resolve: (m) => m.missingOnTask.length,
    }),
  }),
});

const UnschedulableRef = builder.objectRef<UnschedulableGroup>('UnschedulableGroup').implement({
  description:
    'Pending requests that no worker and no pool could ever run; listed only when the viewer may see one of them',
  fields: (t) => ({
    count: t.exposeInt('count', { description: 'How many pending requests the group holds' }),
    sampleWorkRequestIds: t.idList({
      description: 'The first ones the viewer may see',
      resolve: (g) => g.sampleIds.map(String),
    }),
    requiredTags: t.exposeStringList('requiredTags', { description: 'The tags they require' }),
    providedTags: t.exposeStringList('providedTags', {
      description: 'The significant provided tags (those some worker requires)',
    }),
    nearest: t.field({
      type: [NearestRef],
      description: 'The nearest workers or pools and what is missing',
      resolve: (g) => g.nearest,
    }),
  }),
});

const DemandRef = builder.objectRef<ProvisioningDemand>('ProvisioningDemand').implement({
  description: 'What the pools should start and stop for the pending work, and the work no pool can run',
  fields: (t) => ({
    pendingTotal: t.exposeInt('pendingTotal', { description: 'Pending work requests, all of them' }),
    comingTotal: t.exposeInt('comingTotal', {
      description:
        'Coming work requests: BLOCKED ones whose dependencies are all running or completed, that some worker or pool could run (counted apart from pending)',
    }),
    hiddenUnschedulableCount: t.exposeInt('hiddenUnschedulableCount', {
      description:
        "Unschedulable requests in groups the viewer may see none of (other people's private work): counted only",
    }),
    pools: t.field({
      type: [PoolDemandRef],
      description: `Per enabled pool, by name (the first ${LIST_MAXIMA.poolsShown})`,
      resolve: (d) => d.pools.slice(0, LIST_MAXIMA.poolsShown),
    }),
    unschedulable: t.field({
      type: [UnschedulableRef],
      description: 'Groups of pending requests that nothing could run',
      resolve: (d) => d.unschedulable,
    }),
  }),
});

builder.queryFields((t) => ({
  candidateWorkers: t.field({
    type: [CandidatesRef],
    description:
      'The workers that could run each of these requests, in one batch (requests the viewer may not see are left out)',
    args: {
      workRequestIds: t.arg.idList({ required: true, description: 'The work requests' }),
      availableOnly: t.arg.boolean({
        defaultValue: true,
        description:
          'Only workers that may take work now (connected, enabled, not draining; one that shares its resources with room for it now)',
      }),
    },
    resolve: async (_r, args, ctx) => {
      const ids = [...new Set(args.workRequestIds.map(Number).filter((n) => Number.isSafeInteger(n) && n > 0))];
      // The workers' state is read while the visible ids are (the loaders keep it for the operation);
      // its failure, if any, surfaces where the candidates await it.
      if (ids.length) ctx.loaders.workerStates().catch(() => undefined);
      const visible = await visibleIds(ctx, ids);
      const loader = ctx.loaders.candidates(args.availableOnly ?? true);
      const lists = await Promise.all(visible.map((id) => loader.load(id)));
      return visible.map((id, i) => ({ workRequestId: id, workers: lists[i] }));
    },
  }),
  provisioningDemand: t.field({
    type: DemandRef,
    description:
      'Per enabled pool, how many workers to start and which idle ones to stop; and the unschedulable requests apart',
    extensions: costOf(fixedCost(FIELD_COSTS.provisioningDemand)),
    resolve: (_r, _a, ctx) => demandSeenBy(ctx.em, ctx.scheduler, ctx.config, ctx.viewer),
  }),
}));
