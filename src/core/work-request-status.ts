/**
 * The statuses of a work request and the sets of them the code asks about, in their one home (as
 * River's JobState): each status a constant that says who moves a request into it and what takes it
 * out, and each set as its list, its TypeScript predicate and its SQL list (the items of an `in (...)`).
 * A list of statuses spelled anywhere else in src/ fails test/architecture/state-sets.test.ts.
 *
 * A request's life: BLOCKED → PENDING → ASSIGNED → RUNNING → COMPLETED, with ABORTED as the other end;
 * a lease, a release or a terminated worker puts ASSIGNED or RUNNING work back to PENDING.
 */

/** Each status of a work request, by name. abortWorkRequest (services/work/work-requests.ts) ends any that has not finished. */
export const WORK_REQUEST_STATUS = {
  /**
   * Where every request starts (services/work/create-work-requests.ts, a workflow's expansion): it waits
   * for its dependencies. It is queued (PENDING) at once when none is left to wait for, else by
   * settleDependents once they all COMPLETED; it is ABORTED when its task tags cannot be computed or a
   * dependency was ABORTED.
   */
  BLOCKED: 'BLOCKED',
  /**
   * In the queue, its tags frozen and its class found (queueWorkRequest, freezeAnalysis); back here
   * from ASSIGNED or RUNNING when a lease expires, its worker releases it or is terminated
   * (scheduler/storage/leases.ts, releaseWorkRequest). A pass, a pull or a placement assigns it
   * (ASSIGNED); the server runs a workflow (RUNNING) or an internal task (COMPLETED) itself.
   */
  PENDING: 'PENDING',
  /**
   * Given to a worker that has not acknowledged it yet (scheduler/storage/assign.ts, queue-heads.ts).
   * Its worker's startWorkRequest makes it RUNNING (completeWorkRequest may complete it without one); an
   * expired lease, a release or its worker's termination puts it back to PENDING, or ABORTED (a
   * quarantine probe, or past its retries).
   */
  ASSIGNED: 'ASSIGNED',
  /**
   * Started: its worker acknowledged it (START_SQL, a server worker's claim), or the server expanded the
   * workflow. completeWorkRequest ends it (COMPLETED), and a workflow completes once its children have
   * finished; an expired lease, a release or its worker's termination puts it back to PENDING, or
   * ABORTED (a quarantine probe, or past its retries).
   */
  RUNNING: 'RUNNING',
  /** Done, with a result (completeWorkRequest, a workflow's last child, an internal task). Final. */
  COMPLETED: 'COMPLETED',
  /** Ended without a result: aborted, its analysis or expansion failed, a dependency was aborted, or past its retries. Final. */
  ABORTED: 'ABORTED',
} as const;

/** One status of a work request. */
export type WorkRequestStatus = (typeof WORK_REQUEST_STATUS)[keyof typeof WORK_REQUEST_STATUS];

const { BLOCKED, PENDING, ASSIGNED, RUNNING, COMPLETED, ABORTED } = WORK_REQUEST_STATUS;

/** Every status, in the order of a request's life. */
export const WORK_REQUEST_STATUSES = [BLOCKED, PENDING, ASSIGNED, RUNNING, COMPLETED, ABORTED] as const;

/** A list of statuses as the items of a SQL list, `'A', 'B'`: for an `in (...)` of their own or beside other items. */
const sqlList = (statuses: readonly WorkRequestStatus[]): string => statuses.map((s) => `'${s}'`).join(', ');

/** Whether `status` is one of `statuses`. */
const isIn =
  <S extends WorkRequestStatus>(statuses: readonly S[]) =>
  (status: string): status is S =>
    (statuses as readonly string[]).includes(status);

/** The statuses of a request waiting for a worker or for its dependencies: its workspace has something queued (scheduler/rules/queue-order.ts). */
export const QUEUED_STATUSES = [BLOCKED, PENDING] as const;
/** Whether a request in this status is queued. */
export const isQueued = isIn(QUEUED_STATUSES);
/** {@link QUEUED_STATUSES} as the items of a SQL list. */
export const QUEUED_SQL = sqlList(QUEUED_STATUSES);

/** The statuses of the work a worker holds (scheduler/rules/active-work.ts counts it). */
export const ACTIVE_STATUSES = [ASSIGNED, RUNNING] as const;
/** Whether a request in this status is work its worker holds. */
export const isActive = isIn(ACTIVE_STATUSES);
/** {@link ACTIVE_STATUSES} as the items of a SQL list, `'ASSIGNED', 'RUNNING'`. */
export const ACTIVE_SQL = sqlList(ACTIVE_STATUSES);

/** The statuses of a request that may be matched to a worker now or again: PENDING, or active work that a lease or a release can put back. */
export const PENDING_OR_ACTIVE_STATUSES = [PENDING, ...ACTIVE_STATUSES] as const;
/** Whether a request in this status is pending or active. */
export const isPendingOrActive = isIn(PENDING_OR_ACTIVE_STATUSES);
/** {@link PENDING_OR_ACTIVE_STATUSES} as the items of a SQL list. */
export const PENDING_OR_ACTIVE_SQL = sqlList(PENDING_OR_ACTIVE_STATUSES);

/** The final statuses: nothing changes a request in them any more (no output, no abort, no re-queue). */
export const FINISHED_STATUSES = [COMPLETED, ABORTED] as const;
/** Whether a request in this status has finished. */
export const isFinished = isIn(FINISHED_STATUSES);
/** {@link FINISHED_STATUSES} as the items of a SQL list, `'COMPLETED', 'ABORTED'`. */
export const FINISHED_SQL = sqlList(FINISHED_STATUSES);

/** The statuses of a request that has not finished: queued or active. */
export const UNFINISHED_STATUSES = [...QUEUED_STATUSES, ...ACTIVE_STATUSES] as const;
/** Whether a request in this status has not finished. */
export const isUnfinished = isIn(UNFINISHED_STATUSES);
/** {@link UNFINISHED_STATUSES} as the items of a SQL list. */
export const UNFINISHED_SQL = sqlList(UNFINISHED_STATUSES);
