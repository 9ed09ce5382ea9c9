import { ConfigError, intVar } from './variables.js';

/** The smallest TAGSCHED_MAX_LOG_BYTES accepted: room for a head and a tail of a few lines each. */
export const MIN_LOG_BYTES = 1024;

/** How much one input may hold, checked by the services: a request's task data, a tag list, a batch, a request's output; and how long a create's idempotency key is remembered. */
export interface InputConfig {
  /** Largest accepted `taskData`, as JSON, in bytes. */
  readonly maxTaskDataBytes: number;
  /** Most tags accepted in one input list. */
  readonly maxTagsPerSet: number;
  /** Most requests one createWorkRequests call accepts. */
  readonly maxBatchRequests: number;
  /** The most output kept per work request, in bytes: the first half and the last half when it is longer. */
  readonly maxLogBytes: number;
  /** How long a create's idempotency key answers retries, in milliseconds. */
  readonly idempotencyKeyTtlMs: number;
}

/** Reads the input section from the environment. */
export function readInputConfig(env: NodeJS.ProcessEnv): InputConfig {
  return {
    maxTaskDataBytes: intVar(env, 'TAGSCHED_MAX_TASK_DATA_BYTES', 64 * 1024), // 64 KiB of JSON
    maxTagsPerSet: intVar(env, 'TAGSCHED_MAX_TAGS', 100),
    maxBatchRequests: intVar(env, 'TAGSCHED_MAX_BATCH_REQUESTS', 1000),
    maxLogBytes: maxLogBytesVar(env),
    idempotencyKeyTtlMs: intVar(env, 'TAGSCHED_IDEMPOTENCY_KEY_TTL_SECONDS', 24 * 60 * 60) * 1000, // one day
  };
}

function maxLogBytesVar(env: NodeJS.ProcessEnv): number {
  const n = intVar(env, 'TAGSCHED_MAX_LOG_BYTES', 16 * 1024 * 1024); // 16 MiB
  if (!Number.isSafeInteger(n) || n < MIN_LOG_BYTES)
    throw new ConfigError(
      `TAGSCHED_MAX_LOG_BYTES must be a whole number of bytes, at least ${MIN_LOG_BYTES}, got "${env.TAGSCHED_MAX_LOG_BYTES}"`,
    );
  return n;
}
