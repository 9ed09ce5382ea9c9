/**
 * Coming work (docs/design.md: provisioning demand), in its one home: a BLOCKED request whose every
 * dependency is ASSIGNED, RUNNING or COMPLETED, one at least still active, will most likely be PENDING
 * within the run time of that active work. Demand counts it apart from pending work, so that a pool
 * warms up for a workflow's lintian and autopkgtest while its sbuild runs. A BLOCKED request that waits
 * on anything else (a PENDING or BLOCKED dependency, which may never be schedulable) counts for
 * nothing: capacity cannot cure that wait. A request counts in the class its tags had when it was
 * submitted (`work_request.expected_class_id`); one submitted without it (before this rule) does not count.
 * The TypeScript predicate and the SQL say the same; test/scheduler/rules/look-ahead.test.ts checks that
 * they agree.
 */
import { ACTIVE_SQL, isActive } from '../../core/work-request-status.js';

/** Whether a BLOCKED request with dependencies in these statuses is coming work. */
export function isComingWork(dependencyStatuses: readonly string[]): boolean {
  return dependencyStatuses.some(isActive) && dependencyStatuses.every((s) => isActive(s) || s === 'COMPLETED');
}

/**
 * {@link isComingWork} as a SQL condition on the BLOCKED request under `alias` (its status not
 * checked here): none of its dependencies is in a status other than active or COMPLETED, and one is active.
 */
export const isComingWorkSql = (alias: string) =>
  `exists (select 1 from work_request_dependency cd join work_request cx on cx.id = cd.depends_on_id
            where cd.work_request_id = ${alias}.id and cx.status in (${ACTIVE_SQL}))
   and not exists (select 1 from work_request_dependency cd join work_request cx on cx.id = cd.depends_on_id
            where cd.work_request_id = ${alias}.id and cx.status not in (${ACTIVE_SQL}, 'COMPLETED'))`;
