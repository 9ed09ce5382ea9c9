import { intVar } from './variables.js';

/** When the scheduler's passes run, and how long a released request is kept from the worker that released it. */
export interface SchedulerConfig {
  /**
   * Whether passes run by themselves (on events and periodically); off, only requestWork and explicit
   * passes assign. For tests and benchmarks: TAGSCHED_SCHEDULER=manual turns it off.
   */
  readonly automatic: boolean;
  /** The periodic fallback pass, in milliseconds. */
  readonly passIntervalMs: number;
  /** How long a triggered pass waits for more triggers to share it, in milliseconds. */
  readonly passDebounceMs: number;
  /** How long a released request is not offered again to the worker that released it, in milliseconds. */
  readonly releaseBackoffMs: number;
}

/** Reads the scheduler section from the environment. */
export function readSchedulerConfig(env: NodeJS.ProcessEnv): SchedulerConfig {
  return {
    automatic: env.TAGSCHED_SCHEDULER !== 'manual', // for tests and benchmarks
    passIntervalMs: intVar(env, 'TAGSCHED_SCHEDULER_INTERVAL_SECONDS', 10) * 1000, // 10 seconds
    passDebounceMs: intVar(env, 'TAGSCHED_SCHEDULER_DEBOUNCE_MS', 5), // 5 ms
    releaseBackoffMs: intVar(env, 'TAGSCHED_RELEASE_BACKOFF_SECONDS', 10 * 60) * 1000, // ten minutes
  };
}
