import { boolVar, intVar, urlVar } from './variables.js';

/** The provisioner's cycle (src/loops/provisioner/): whether it launches, how often it runs, how it backs off failing pools. */
export interface ProvisionerConfig {
  /** Whether this process launches and stops pool instances; off for sites with their own script (retirements run either way). */
  readonly enabled: boolean;
  /** The periodic cycle (with reconciliation against every provider's list), in milliseconds. */
  readonly cycleIntervalMs: number;
  /** How long a cycle triggered by a change waits for more changes to share it, in milliseconds. */
  readonly cycleDebounceMs: number;
  /** An instance whose worker has not connected this long after its launch is taken as failed, in milliseconds. */
  readonly bootTimeoutMs: number;
  /** The wait before a pool's first launch retry after a failure; it doubles with each failure, in milliseconds. */
  readonly launchBackoffMs: number;
  /** The longest wait between launch retries of a failing pool, in milliseconds. */
  readonly launchBackoffMaxMs: number;
  /** Consecutive failed launches after which a pool shows as degraded. */
  readonly degradedAfterFailures: number;
  /** How long an offering that failed for capacity or quota is skipped by launches, in milliseconds (providers/offerings.ts). */
  readonly offeringUnavailableMs: number;
  /** At most this many launches a minute on one provider account, across the pools that share it; 0: no limit (scheduler/rules/scale-in.ts: rateRoom). */
  readonly accountLaunchesPerMinute: number;
  /** The GraphQL URL launched agents are given; null derives it from HOST and the port listened on. */
  readonly agentServerUrl: string | null;
}

/** Reads the provisioner section from the environment. */
export function readProvisionerConfig(env: NodeJS.ProcessEnv): ProvisionerConfig {
  return {
    enabled: boolVar(env, 'TAGSCHED_PROVISIONER', true),
    cycleIntervalMs: intVar(env, 'TAGSCHED_PROVISIONER_INTERVAL_SECONDS', 30) * 1000, // 30 seconds
    cycleDebounceMs: intVar(env, 'TAGSCHED_PROVISIONER_DEBOUNCE_MS', 1000), // one second
    bootTimeoutMs: intVar(env, 'TAGSCHED_BOOT_TIMEOUT_SECONDS', 600) * 1000, // ten minutes
    launchBackoffMs: intVar(env, 'TAGSCHED_LAUNCH_BACKOFF_SECONDS', 30) * 1000, // 30 seconds, doubling
    launchBackoffMaxMs: intVar(env, 'TAGSCHED_LAUNCH_BACKOFF_MAX_SECONDS', 900) * 1000, // 15 minutes
    degradedAfterFailures: Math.max(1, intVar(env, 'TAGSCHED_DEGRADED_AFTER_FAILURES', 3)),
    offeringUnavailableMs: intVar(env, 'TAGSCHED_OFFERING_UNAVAILABLE_SECONDS', 180) * 1000, // three minutes
    accountLaunchesPerMinute: intVar(env, 'TAGSCHED_ACCOUNT_LAUNCHES_PER_MINUTE', 0),
    agentServerUrl: urlVar(env, 'TAGSCHED_AGENT_SERVER_URL', null),
  };
}
