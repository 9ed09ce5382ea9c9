/**
 * What the scheduler and the services tell the metrics about, as they happen in this process. The
 * interfaces live here, apart from prom-client, so that those modules depend on a few methods
 * only (and tests or tools that build them without metrics pass NO_METRICS).
 */

/** How an assignment was made: a worker's pull, the placement of a new request, or a pass. */
export type AssignmentVia = 'pull' | 'place' | 'pass';

/** The scheduler's events. */
export interface SchedulerRecorder {
  /** Assignments just committed; `pendingAt` is when each request last became PENDING. */
  assigned(assignments: readonly { readonly pendingAt?: Date | null }[], via: AssignmentVia): void;
  /** A full pass ran in this process (it found pending work and tried). */
  passRan(reason: string): void;
}

/** The work lifecycle's events. */
export interface LifecycleRecorder {
  /** A request was completed by this process, after the commit. */
  completed(request: { readonly taskName: string; readonly result?: string | null; readonly startedAt?: Date | null; readonly completedAt?: Date | null }): void;
}

/** Recorders that record nothing. */
export const NO_METRICS: SchedulerRecorder & LifecycleRecorder = {
  assigned: () => undefined,
  passRan: () => undefined,
  completed: () => undefined,
};
