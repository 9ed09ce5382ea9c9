/**
 * A request a worker released (its agent has no handler for the task, say) is not offered to that
 * worker again until the backoff ends (docs/design.md: placement quality); other workers may take it at once. The rule's one
 * home: the TypeScript predicate (isBackedOff) and the SQL condition for one worker's pull
 * (notBackedOffSql); test/scheduler/rules/release-backoff.test.ts checks that they agree. The
 * backoffs are read and written by storage/release-backoffs.ts.
 */

/** One backoff: the worker the request is not offered to before `until`. */
export interface Backoff {
  readonly workerId: number;
  readonly until: Date;
}

/** Whether one of a request's backoffs keeps it from this worker now. */
export const isBackedOff = (backoffs: readonly Backoff[] | undefined, workerId: number, now: Date): boolean =>
  backoffs?.some((b) => b.workerId === workerId && b.until.getTime() > now.getTime()) ?? false;

/**
 * {@link isBackedOff}, negated, as a SQL condition on the request under `requestAlias`: two
 * parameters, the worker id and now (notBackedOffParams), in its place.
 */
export const notBackedOffSql = (requestAlias: string) =>
  `not exists (select 1 from release_backoff b where b.work_request_id = ${requestAlias}.id and b.worker_id = ? and b.until > ?)`;

/** The parameters of notBackedOffSql. */
export const notBackedOffParams = (workerId: number, now: Date): unknown[] => [workerId, now];

/** The SQL condition of a backoff in force now, on the release_backoff table under `alias` (one parameter: now). */
export const inForceSql = (alias: string) => `${alias}.until > ?`;
