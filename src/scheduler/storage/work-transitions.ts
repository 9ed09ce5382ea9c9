import { recordingEstimateErrorSql } from './start-estimate.js';

/**
 * A request's own worker starts it: ASSIGNED → RUNNING, now, in one statement (its row lock is the
 * update's). Both ways of starting (services/work/work-lifecycle.ts: the one-statement path and the path
 * that locks the row first to answer a repeated acknowledgement or a refusal) write it with this.
 * Parameters: now, the request id, the worker id. Returns the row (`returning *`), or nothing when the
 * request is not that worker's ASSIGNED request. A request with a kept start estimate adds its error
 * to its class's in the same statement (start-estimate.ts: recordingEstimateErrorSql).
 */
export const START_SQL = recordingEstimateErrorSql(
  `update work_request set status = 'RUNNING', started_at = ? where id = ? and worker_id = ? and status = 'ASSIGNED' returning *`,
);
