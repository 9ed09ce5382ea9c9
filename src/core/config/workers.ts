import { countVar, intVar, positiveIntVar } from './variables.js';

/** Which workers may get work (fresh metadata, no quarantine), the probes that lift a quarantine, and how long a pool's activation token lasts. */
export interface WorkersConfig {
  /** A worker whose metadata is older than this (or was never reported) gets no work, in milliseconds. */
  readonly metadataFreshMs: number;
  /** Consecutive ERROR results after which a worker is quarantined, when the same tasks succeed elsewhere; 0: never. */
  readonly quarantineAfterErrors: number;
  /** How often a quarantined, idle, connected worker is given a quarantine probe (services/work/quarantine-probes.ts), in milliseconds; 0: never. */
  readonly quarantineProbeMs: number;
  /** How long a pool-wide activation token is accepted when its creator gives no expiry, in milliseconds. */
  readonly activationTokenTtlMs: number;
  /**
   * How long a worker's pull waits for a row lock another transaction holds (PostgreSQL's lock_timeout, set in
   * the pull's own transaction: scheduler/storage/next-work.ts) before it answers no work, in milliseconds; 0: no limit.
   */
  readonly pullLockTimeoutMs: number;
}

/** Reads the workers section from the environment. */
export function readWorkersConfig(env: NodeJS.ProcessEnv): WorkersConfig {
  return {
    metadataFreshMs: intVar(env, 'TAGSCHED_METADATA_FRESH_SECONDS', 65 * 60) * 1000, // 65 minutes
    quarantineAfterErrors: intVar(env, 'TAGSCHED_QUARANTINE_AFTER_ERRORS', 5),
    quarantineProbeMs: intVar(env, 'TAGSCHED_QUARANTINE_PROBE_SECONDS', 10 * 60) * 1000, // ten minutes
    activationTokenTtlMs: positiveIntVar(env, 'TAGSCHED_ACTIVATION_TOKEN_TTL_SECONDS', 24 * 60 * 60) * 1000, // one day
    pullLockTimeoutMs: countVar(env, 'TAGSCHED_PULL_LOCK_TIMEOUT_MS', 5000, 3_600_000), // five seconds
  };
}
