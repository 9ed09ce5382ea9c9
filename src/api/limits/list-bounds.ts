/**
 * How long each list of the API can be, in one place: the cost model (cost.ts) multiplies what a list's
 * items select by the bound it finds here, and test/security/list-bounds.test.ts walks the schema and fails
 * on a list field that has none. A bound is one of:
 * - `page`: a `first` argument, refused past `max` (pagination.ts); the cost counts `first` (or `default`)
 *   items (`values`: names or ids shown from memory, which cost less than rows);
 * - `edges`: the edges of a connection: the field that answers the connection is a `page` and counts them;
 * - `rows`: at most `max` items, a maximum the service enforces when it writes (or cuts the list at when it
 *   answers), named in `why`; the cost counts `max` items;
 * - `held`: values the parent holds (a column, an answer computed once and costed as a whole): no read per
 *   item, and an item selects nothing that reads or lists rows (the test checks it), so what it selects is
 *   counted once;
 * - `perId`: one item per id of the argument `arg` (counted from the operation).
 *
 * A `page` or `rows` bound with `count` may also be counted before the operation runs (graphql.ts does
 * when the operation is over the limit at the maxima): `count` names a count of services/input/list-counts.ts,
 * the most items the list holds now (for any one parent); the cost then counts the smaller of that and the
 * bound, so a small site pays for what it has while the maximum still holds.
 */
import { PAGE } from './page.js';
import { MAX_OFFERINGS } from '../../providers/offerings.js';
import { LIST_MAXIMA } from '../../services/input/list-maxima.js';
import type { ListCount } from '../../services/input/list-counts.js';

export { LIST_MAXIMA };

/** The settings some bounds follow (core/config/input.ts). */
export interface ListSettings {
  /** TAGSCHED_MAX_BATCH_REQUESTS: work requests in one createWorkRequests. */
  maxBatchRequests: number;
}

export type ListBound =
  | { kind: 'page'; default: number; max: number; values?: boolean; count?: ListCount }
  | { kind: 'edges' }
  | { kind: 'rows'; max: number | ((s: ListSettings) => number); why: string; count?: ListCount }
  | { kind: 'held'; why: string }
  | { kind: 'perId'; arg: string };

const page = (defaultSize: number = PAGE.default, max: number = PAGE.max, count?: ListCount): ListBound => ({
  kind: 'page',
  default: defaultSize,
  max,
  count,
});
const rows = (max: number | ((s: ListSettings) => number), why: string, count?: ListCount): ListBound => ({
  kind: 'rows',
  max,
  why,
  count,
});
const held = (why: string): ListBound => ({ kind: 'held', why });
const EDGES: ListBound = { kind: 'edges' };

const TAGS = 'tags of a set, held by the row';
const SPEC = 'a pool specification value, held by the row (pool-specifications.ts bounds it)';

/** Every list field, and every field that answers a connection, by `Type.field`. */
export const LIST_BOUNDS: Readonly<Record<string, ListBound>> = {
  // Pages and their edges.
  'Query.users': page(),
  'Query.workers': page(),
  'Query.workRequests': page(),
  'WorkRequest.children': page(),
  'WorkerPool.instances': page(),
  'Query.workspaces': page(PAGE.max, PAGE.max, 'workspaces'),
  'Query.groups': page(100, 100, 'groups'),
  'Query.tokens': page(PAGE.max, PAGE.max, 'tokens'),
  'Query.workerImages': page(PAGE.max, PAGE.max, 'workerImages'),
  'Query.environments': page(PAGE.max, PAGE.max, 'environments'),
  'UserConnection.edges': EDGES,
  'WorkerConnection.edges': EDGES,
  'WorkRequestConnection.edges': EDGES,
  'InstanceConnection.edges': EDGES,
  'WorkRequest.candidateWorkers': page(100),
  'WorkRequestCandidates.workers': page(100),
  'WorkRequestCandidates.workerNames': { kind: 'page', default: 100, max: PAGE.max, values: true },
  'Query.candidateWorkers': { kind: 'perId', arg: 'workRequestIds' },

  // Rows, bounded by a maximum enforced when written.
  'Workspace.rules': rows(
    LIST_MAXIMA.rulesPerWorkspace,
    'createTaskRule refuses a rule past the maximum',
    'rulesPerWorkspace',
  ),
  'Query.siteRules': rows(
    LIST_MAXIMA.rulesPerWorkspace,
    'createTaskRule refuses a site rule past the maximum',
    'siteRules',
  ),
  'Query.leaders': rows(LIST_MAXIMA.processesShown, 'the leases of the duties, the first by duty'),
  'Query.serverProcesses': rows(LIST_MAXIMA.processesShown, 'the registered processes, the first by name'),
  'Workspace.members': rows(
    LIST_MAXIMA.membersPerWorkspace,
    'setWorkspaceMember refuses a member past the maximum',
    'membersPerWorkspace',
  ),
  'Group.members': rows(
    LIST_MAXIMA.membersPerGroup,
    'addGroupMembers refuses members past the maximum',
    'membersPerGroup',
  ),
  'Query.workerPools': page(LIST_MAXIMA.poolsShown, LIST_MAXIMA.poolsShown, 'pools'),
  'ProvisioningDemand.pools': rows(
    LIST_MAXIMA.poolsShown,
    'one per enabled pool, the answer cut at the maximum',
    'pools',
  ),
  'PoolDemand.stopWorkers': rows(LIST_MAXIMA.stopWorkersShown, 'the answer is cut at the maximum'),
  'WorkerImage.publications': rows(
    LIST_MAXIMA.publicationsShown,
    'one per provider and region, the answer cut at the maximum',
    'publicationsPerImage',
  ),
  'CreateWorkRequestsPayload.requests': rows(
    (s) => s.maxBatchRequests,
    'createWorkRequests refuses more (TAGSCHED_MAX_BATCH_REQUESTS)',
  ),
  'HeartbeatPayload.assignedWorkRequests': rows(LIST_MAXIMA.workerConcurrency, "at most the worker's concurrency"),

  // Values held by the parent.
  'Workspace.providableTagPrefixes': held('tag prefixes, at most 100 (updateWorkspace)'),
  'TaskRule.providedTags': held(TAGS),
  'TaskRule.requiredTags': held(TAGS),
  'WorkRequest.providedTags': held(TAGS),
  'WorkRequest.requiredTags': held(TAGS),
  'WorkRequest.droppedTags': held(TAGS),
  'WorkRequest.userProvidedTags': held(TAGS),
  'WorkRequest.userRequiredTags': held(TAGS),
  'WorkRequest.dependsOn': held('ids, read for all the requests of an operation in one statement'),
  'Worker.providedTags': held(TAGS),
  'Worker.requiredTags': held(TAGS),
  'Worker.rejectedTags': held(TAGS),
  'WorkerPool.providedTags': held(TAGS),
  'WorkerPool.requiredTags': held(TAGS),
  'WorkerPool.templateProvidedTags': held(TAGS),
  'WorkerPool.templateRequiredTags': held(TAGS),
  'PoolSpecifications.architectures': held(SPEC),
  'PoolSpecifications.command': held(SPEC),
  'PoolSpecifications.enableBackends': held(SPEC),
  'PoolSpecifications.enableTasks': held(SPEC),
  'PoolSpecifications.handlers': held(SPEC),
  'PoolSpecifications.securityGroupIds': held(SPEC),
  'ImageRecipe.enableBackends': held("the image's recipe, held by its manifest"),
  'ImageRecipe.enableTasks': held("the image's recipe, held by its manifest"),
  'WorkerImage.packages': held("the image's manifest"),
  'WorkerImage.tags': held("the image's manifest"),
  'InputError.problems': held('the problems of one input, a few at most'),
  // The answers of diagnosis and provisioningDemand, costed as a whole (cost.ts, FIELD_COSTS).
  'Diagnosis.matchingPools': held('part of the diagnosis'),
  'Diagnosis.pools': held('part of the diagnosis'),
  'PoolOutlook.atLimit': held('part of the diagnosis'),
  'WarmSchedule.periods': held('a pool column, at most WARM_PERIODS_MAX (50) periods, checked when written'),
  'WarmPeriod.days': held('a pool column, at most the seven days of a week'),
  'PoolOutlook.launching': held('part of the diagnosis'),
  'Diagnosis.mismatches': held('part of the diagnosis'),
  'Diagnosis.releaseBackoffs': held('part of the diagnosis'),
  'Diagnosis.unavailableWorkers': held('part of the diagnosis'),
  'Diagnosis.resourceWaits': held('part of the diagnosis'),
  'ResourceWait.reasons': held('part of the diagnosis'),
  'TagMismatch.missingOnTask': held('part of the diagnosis'),
  'TagMismatch.missingOnWorker': held('part of the diagnosis'),
  'TagMismatch.workerNames': held('part of the diagnosis'),
  'Placement.preferredWorkers': held('part of the diagnosis'),
  'Placement.rules': held('part of the diagnosis'),
  'QueuePosition.aheadBy': held('part of the diagnosis'),
  'PoolDemand.limitedBy': held('part of the demand'),
  'PoolDemand.unavailableOfferings': rows(
    MAX_OFFERINGS,
    'a pool has at most MAX_OFFERINGS offerings (pool-specifications.ts)',
  ),
  'WorkerPool.offerings': rows(MAX_OFFERINGS, 'a pool has at most MAX_OFFERINGS offerings (pool-specifications.ts)'),
  'PoolSpecifications.offerings': held(SPEC),
  'ProvisioningDemand.unschedulable': held('part of the demand'),
  'UnschedulableGroup.nearest': held('part of the demand'),
  'UnschedulableGroup.providedTags': held('part of the demand'),
  'UnschedulableGroup.requiredTags': held('part of the demand'),
  'UnschedulableGroup.sampleWorkRequestIds': held('part of the demand'),
  'NearestMatch.missingOnTask': held('part of the demand'),
  'NearestMatch.missingOnWorker': held('part of the demand'),
  'NearestMatch.workerNames': held('part of the demand'),
};

/**
 * How many items a bound counts for these arguments (a `first` past the maximum counts as the maximum: the
 * field refuses it), and no more than `counted`, the items its `count` found, when it was counted.
 */
export function itemsCounted(
  bound: ListBound,
  args: Record<string, unknown>,
  settings: ListSettings,
  counted?: number,
): number {
  const now = counted ?? Infinity;
  switch (bound.kind) {
    case 'page':
      return Math.min(bound.max, now, Math.max(0, Number(args.first ?? bound.default) || 0));
    case 'rows':
      return Math.min(now, typeof bound.max === 'number' ? bound.max : bound.max(settings));
    case 'perId': {
      const ids = args[bound.arg];
      return Array.isArray(ids) ? ids.length : 1;
    }
    case 'edges':
    case 'held':
      return 1;
  }
}
