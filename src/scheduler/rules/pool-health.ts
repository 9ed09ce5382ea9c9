import type { WorkerPool } from '../../storage/entities/worker-pool.js';

/** How a pool's launches are going, as demand and the pool's page show it. */
export interface PoolHealth {
  /** Its launches keep failing: as many in a row as `degradedAfterFailures`, or one that only an admin can cure (auth, invalid). */
  readonly degraded: boolean;
  /** No launch is tried before `launchRetryAt` (backoff after a failure). */
  readonly backingOff: boolean;
}

/** Provider error kinds that retrying will not cure: the pool needs an admin (providers/provider.ts). */
const NEEDS_AN_ADMIN = new Set(['auth', 'invalid']);

/** The one rule for a pool's launch health, shared by demand, the provisioner and GraphQL. */
export function poolHealth(
  pool: Pick<WorkerPool, 'launchFailures' | 'launchRetryAt' | 'lastErrorKind'>,
  now: Date,
  degradedAfterFailures: number,
): PoolHealth {
  const failing = pool.launchFailures > 0;
  return {
    degraded: failing && (pool.launchFailures >= degradedAfterFailures || NEEDS_AN_ADMIN.has(pool.lastErrorKind ?? '')),
    backingOff: failing && pool.launchRetryAt != null && pool.launchRetryAt.getTime() > now.getTime(),
  };
}

/** How long a pool that failed `failures` launches in a row waits before it tries again: doubling from `firstMs` up to `maxMs`; the longest after an error only an admin can cure. */
export function launchRetryDelayMs(failures: number, kindNeedsAdmin: boolean, firstMs: number, maxMs: number): number {
  if (kindNeedsAdmin) return maxMs;
  return Math.min(maxMs, firstMs * 2 ** Math.max(0, Math.min(30, failures - 1)));
}

/** Whether a provider error kind needs an admin to be cured (no retry will help). */
export function needsAnAdmin(kind: string): boolean {
  return NEEDS_AN_ADMIN.has(kind);
}
