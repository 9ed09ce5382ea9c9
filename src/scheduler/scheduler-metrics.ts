/**
 * What the scheduler loop tells the metrics, as it happens in this process: the few methods it needs.
 * The composition root (app.ts) passes the metrics' implementation in (services/metrics-recorder.ts); the
 * scheduler imports nothing from metrics/.
 */

/** How an assignment was made: a worker's pull, the placement of a new request, or a pass. */
export type AssignmentVia = 'pull' | 'place' | 'pass';

/** The scheduler loop's events, for the metrics. */
export interface SchedulerMetrics {
  /** Assignments just committed; `pendingAt` is when each request last became PENDING. */
  assigned(assignments: readonly { readonly pendingAt?: Date | null }[], via: AssignmentVia): void;
  /** A full pass ran in this process (it found pending work and tried). */
  passRan(reason: string): void;
}

/** Metrics that record nothing (tests and tools that build a scheduler without metrics). */
export const NO_SCHEDULER_METRICS: SchedulerMetrics = {
  assigned() {},
  passRan() {},
};
