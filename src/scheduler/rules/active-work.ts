/**
 * A worker's active work and its capacity (docs/design.md: workers), in their one home: the work a worker holds is
 * its requests that are ASSIGNED or RUNNING, and it has a free slot while it holds fewer than its
 * concurrency; of that work, the ASSIGNED part waits for the worker's acknowledgement. The SQL
 * fragments (isActiveSql, isUnacknowledgedSql, activeWorkSql, activeByWorkerSql, hasFreeSlotSql) and the
 * TypeScript predicates that say the same (isUnacknowledged and freeSlots here, isActive in the statuses'
 * home, core/work-request-status.ts) agree, as test/scheduler/rules/active-work.test.ts checks. Every
 * count of a worker's work, whoever makes it (the matchers, the API, the status pages, the metrics, the provisioner), is built
 * from these fragments; the partial index `work_request_active_worker` has the same condition.
 */
import { ACTIVE_SQL } from '../../core/work-request-status.js';

/** isActive (core/work-request-status.ts) as a SQL condition on the work_request table under `alias`. */
export const isActiveSql = (alias: string) => `${alias}.status in (${ACTIVE_SQL})`;

/** Whether a request in this status waits for its worker's acknowledgement (startWorkRequest): assigned, not yet running. */
export const isUnacknowledged = (status: string): boolean => status === 'ASSIGNED';

/** {@link isUnacknowledged} as a SQL condition on the work_request table under `alias`. */
export const isUnacknowledgedSql = (alias: string) => `${alias}.status = 'ASSIGNED'`;

/** The number of requests the worker whose id is the SQL expression `workerId` holds, as an int (a scalar subquery; one index probe). */
export const activeWorkSql = (workerId: string) =>
  `(select count(*)::int from work_request a where a.worker_id = ${workerId} and ${isActiveSql('a')})`;

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
