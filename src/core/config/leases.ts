import { intVar, positiveIntVar } from './variables.js';

/** How long an assignment may wait for its worker, and how often a request may be taken back before it is given up. */
export interface LeasesConfig {
  /** An assignment not acknowledged (startWorkRequest) within this goes back to PENDING, in milliseconds. */
  readonly ackTimeoutMs: number;
  /** A RUNNING request whose worker has not been heard from for this long is re-queued, in milliseconds. */
  readonly heartbeatTimeoutMs: number;
  /** Re-queues a request may go through before it is ABORTED. */
  readonly maxRetries: number;
  /**
   * How long a process's lease of a duty lasts without renewal (loops/leadership.ts), in milliseconds: the
   * longest a dead leader's duties wait for another process. Renewed every fifth of it.
   */
  readonly leaderLeaseMs: number;
}

/** Reads the leases section from the environment. */
export function readLeasesConfig(env: NodeJS.ProcessEnv): LeasesConfig {
  return {
    ackTimeoutMs: intVar(env, 'TAGSCHED_ACK_TIMEOUT_SECONDS', 60) * 1000, // one minute
    heartbeatTimeoutMs: intVar(env, 'TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS', 120) * 1000, // two minutes
    maxRetries: intVar(env, 'TAGSCHED_MAX_RETRIES', 3),
    leaderLeaseMs: positiveIntVar(env, 'TAGSCHED_LEADER_LEASE_SECONDS', 15) * 1000,
  };
}
