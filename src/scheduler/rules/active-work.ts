/**
 * A worker's active work and its capacity (docs/design.md: workers), in their one home: the work a worker holds is
 * its requests that are ASSIGNED or RUNNING, and it has a free slot while it holds fewer than its
 * concurrency; of that work, the ASSIGNED part waits for the worker's acknowledgement. The TypeScript
 * predicates (isActive, isUnacknowledged, freeSlots) and the SQL fragments that say the same (isActiveSql,
 * isUnacknowledgedSql, activeWorkSql, activeByWorkerSql, hasFreeSlotSql) are here, and
 * test/scheduler/rules/active-work.test.ts checks that the two agree. Every count of a worker's work,
 * whoever makes it (the matchers, the API, the status pages, the metrics, the provisioner), is built
 * from these fragments; the partial index `work_request_active_worker` has the same condition.
 */
import { ACTIVE_STATUSES } from '../../storage/entities/work-request.js';

/** The statuses of the work a worker holds. */
export type ActiveStatus = (typeof ACTIVE_STATUSES)[number];

/** Whether a request in this status is work its worker holds. */
export const isActive = (status: string): status is ActiveStatus => (ACTIVE_STATUSES as readonly string[]).includes(status);

/** The statuses of active work as the items of a SQL list, `'ASSIGNED', 'RUNNING'`, to put in an `in (...)` of their own or with other statuses. */
export const ACTIVE_STATUSES_SQL = ACTIVE_STATUSES.map((s) => `'${s}'`).join(', ');

/** {@link isActive} as a SQL condition on the work_request table under `alias`. */
export const isActiveSql = (alias: string) => `${alias}.status in (${ACTIVE_STATUSES_SQL})`;

/** Whether a request in this status waits for its worker's acknowledgement (startWorkRequest): assigned, not yet running. */
export const isUnacknowledged = (status: string): boolean => status === 'ASSIGNED';

/** {@link isUnacknowledged} as a SQL condition on the work_request table under `alias`. */
export const isUnacknowledgedSql = (alias: string) => `${alias}.status = 'ASSIGNED'`;

/** The number of requests the worker whose id is the SQL expression `workerId` holds, as an int (a scalar subquery; one index probe). */
export const activeWorkSql = (workerId: string) => `(select count(*)::int from work_request a where a.worker_id = ${workerId} and ${isActiveSql('a')})`;

/**
 * A relation of `worker_id, active` (an int): how many requests each worker holds, for the workers
 * that hold any. `where` narrows the workers (a condition on the work_request alias `a`, e.g.
 * `a.worker_id = any(?::int[])`), with its parameters in its place.
 */
export const activeByWorkerSql = (where = 'true') =>
  `(select a.worker_id, count(*)::int as active from work_request a where ${isActiveSql('a')} and ${where} group by a.worker_id)`;

/** A worker's free slots: its concurrency less the work it holds, never below 0. Availability aside (rules/availability.ts). */
export const freeSlots = (concurrency: number, active: number): number => Math.max(0, concurrency - active);

/** {@link freeSlots} > 0 as a SQL condition on the worker table under `alias`. */
export const hasFreeSlotSql = (alias: string) => `${alias}.concurrency > ${activeWorkSql(`${alias}.id`)}`;
