/**
 * What the provisioner tells the metrics, as it happens in this process: the few methods it needs.
 * The composition root (app.ts) passes the metrics' implementation in (api/metrics/process-metrics.ts);
 * the provisioner imports nothing from metrics/.
 */

/** Why an instance ended, as the provisioner recorded it: every value is a label of `tagsched_instance_ends_total`. */
export const INSTANCE_END_REASONS = {
  /** Idle past its pool's idle timeout: stopped by the demand. */
  IDLE: 'idle',
  /** Retired (scheduler/rules/instance-retirement.ts): it ran its pool's most requests per instance, then stopped once idle. */
  WORK_REQUESTS: 'work_requests',
  /** Retired: older than its pool's maximum lifetime, then stopped once idle. */
  LIFETIME: 'lifetime',
  /** Retired: made from older specifications than its pool's (a rollout), stopped once idle. */
  OUTDATED: 'outdated',
  /** Its provider no longer had it, without having said it ended. */
  LOST: 'lost',
  /** Its provider saw it end by itself (a local agent's exit). */
  ENDED: 'ended',
  /** Its worker did not connect within TAGSCHED_BOOT_TIMEOUT_SECONDS. */
  BOOT_TIMEOUT: 'boot_timeout',
  /** Its launch was interrupted and its provider has no such instance. */
  INTERRUPTED_LAUNCH: 'interrupted_launch',
  /** A stop asked earlier (by the demand or an admin) is done: its provider no longer lists it. */
  STOPPED: 'stopped',
} as const;
export type InstanceEndReason = (typeof INSTANCE_END_REASONS)[keyof typeof INSTANCE_END_REASONS];

/** The provisioner's events, for the metrics. */
export interface ProvisionerMetrics {
  /** A provider accepted a launch for the pool. */
  launched(pool: string): void;
  /** A launch failed; `kind` is the provider error's kind (provider.ts: PROVIDER_ERROR_KINDS). */
  launchFailed(pool: string, kind: string): void;
  /** An instance of the pool ended, or was decided to end (an idle stop), for this reason. */
  instanceEnded(pool: string, reason: InstanceEndReason): void;
}

/** Metrics that record nothing (tests and tools that build a provisioner without metrics). */
export const NO_PROVISIONER_METRICS: ProvisionerMetrics = {
  launched() {},
  launchFailed() {},
  instanceEnded() {},
};
