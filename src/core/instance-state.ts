/**
 * The states of an instance (docs/design.md: pools and instances) and the sets of them the code asks
 * about, in their one home (as River's JobState, and as core/work-request-status.ts for requests): each
 * state a constant that says who moves an instance into it and what takes it out, and each set as its
 * list, its TypeScript predicate and its SQL list (the items of an `in (...)`). A list of states spelled
 * anywhere else in src/ fails test/architecture/state-sets.test.ts.
 *
 * An instance's life: LAUNCHING → RUNNING → STOPPING → TERMINATED, with FAILED as the other end.
 */

/** Each state of an instance, by name. */
export const INSTANCE_STATE = {
  /**
   * Recorded before its provider is asked (recordLaunch in services/pools/instances.ts, by the
   * provisioner or a site's script). RUNNING once its worker connects (services/workers/instance-running.ts);
   * STOPPING when its worker is terminated; FAILED when its launch fails or its worker does not connect
   * in time (loops/provisioner/reconcile.ts); TERMINATED when its provider no longer has it.
   */
  LAUNCHING: 'LAUNCHING',
  /**
   * Its worker connected. STOPPING when it is to go (idle or retired in the provisioner's cycle, an
   * admin's terminateWorker, a spot interruption); TERMINATED or FAILED when its provider no longer has
   * it (reconciliation) or a site's script says it is gone (recordInstanceStopped).
   */
  RUNNING: 'RUNNING',
  /** To be stopped at its provider (terminateIn). TERMINATED once its provider no longer lists it, or a site's script says so (FAILED with an error). */
  STOPPING: 'STOPPING',
  /** Gone at its provider. Final. */
  TERMINATED: 'TERMINATED',
  /** Its launch failed or it never came up, with the provider's error. Final. */
  FAILED: 'FAILED',
} as const;

/** One state of an instance. */
export type InstanceState = (typeof INSTANCE_STATE)[keyof typeof INSTANCE_STATE];

const { LAUNCHING, RUNNING, STOPPING, TERMINATED, FAILED } = INSTANCE_STATE;

/** Every state, in the order of an instance's life. */
export const INSTANCE_STATES = [LAUNCHING, RUNNING, STOPPING, TERMINATED, FAILED] as const;

/** A list of states as the items of a SQL list, `'A', 'B'`. */
const sqlList = (states: readonly InstanceState[]): string => states.map((s) => `'${s}'`).join(', ');

/** Whether `state` is one of `states`. */
const isIn =
  <S extends InstanceState>(states: readonly S[]) =>
  (state: string): state is S =>
    (states as readonly string[]).includes(state);

/** The states of an instance that may still exist at its provider and cost runtime: every state but the two ends. */
export const LIVE_INSTANCE_STATES = [LAUNCHING, RUNNING, STOPPING] as const;
/** Whether an instance in this state is live. */
export const isLiveInstance = isIn(LIVE_INSTANCE_STATES);
/** {@link LIVE_INSTANCE_STATES} as the items of a SQL list. */
export const LIVE_INSTANCE_SQL = sqlList(LIVE_INSTANCE_STATES);

/** The states of an instance that is not to be stopped yet: launching, or running with its worker. */
export const LAUNCHING_OR_RUNNING_STATES = [LAUNCHING, RUNNING] as const;
/** Whether an instance in this state is launching or running. */
export const isLaunchingOrRunning = isIn(LAUNCHING_OR_RUNNING_STATES);
/** {@link LAUNCHING_OR_RUNNING_STATES} as the items of a SQL list, `'LAUNCHING', 'RUNNING'`. */
export const LAUNCHING_OR_RUNNING_SQL = sqlList(LAUNCHING_OR_RUNNING_STATES);
