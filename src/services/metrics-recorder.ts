/**
 * What the scheduler and the services tell the metrics about, as they happen in this process. The
 * interfaces live here, apart from prom-client, so that those modules depend on a few methods
 * only (and tests or tools that build them without metrics pass NO_METRICS).
 */

import type { SchedulerMetrics } from '../scheduler/scheduler-metrics.js';
import type { RunStatistics } from '../shared/run-statistics.js';

/** The scheduler's events: the interface the scheduler loop defines (scheduler/scheduler-metrics.ts), recorded here. */
export type SchedulerRecorder = SchedulerMetrics;

/**
 * The provisioner's events. The provisioner sits above this layer and defines the same methods
 * (loops/provisioner/provisioner-metrics.ts); app.ts passes these in, matching by shape.
 */
export interface ProvisionerRecorder {
  launched(pool: string): void;
  launchFailed(pool: string, kind: string): void;
  instanceEnded(pool: string, reason: string): void;
}

/** The work lifecycle's events. */
export interface LifecycleRecorder {
  /** A request was completed by this process, after the commit, with what its run used when its agent reported it. */
  completed(
    request: {
      readonly taskName: string;
      readonly result?: string | null;
      readonly startedAt?: Date | null;
      readonly completedAt?: Date | null;
    },
    statistics?: RunStatistics | null,
  ): void;
}

/** Recorders that record nothing. */
export const NO_METRICS: SchedulerRecorder & LifecycleRecorder = {
  assigned: () => undefined,
  passRan: () => undefined,
  completed: () => undefined,
};
