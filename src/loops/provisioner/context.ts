import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import type { ProvisionerConfig } from '../../core/config/provisioner.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import { WorkerPoolSchema } from '../../storage/entities/worker-pool.js';
import type { Events } from '../../storage/events.js';
import type { Logger } from '../../core/log.js';
import type { SecretBox } from '../../services/identity/secrets.js';
import type { ClassCache } from '../../scheduler/matching/class-cache.js';
import { launchRetryDelayMs, needsAnAdmin } from '../../scheduler/rules/pool-health.js';
import type { WorkerSnapshot } from '../../scheduler/storage/worker-snapshot.js';
import { callProvider } from './calls.js';
import { ProviderError, type Provider, type ProviderCall } from '../../providers/provider.js';
import type { ProvisionerMetrics } from './provisioner-metrics.js';
import type { LeaseHold } from '../leadership.js';
import { holdsLease } from '../../storage/db/leader-lease.js';

/** The sections a cycle reads: its own and the providers', and those of the demand it computes and of the terminations it makes. */
export type CycleConfig = Pick<Config, 'provisioner' | 'providers' | 'workers' | 'tags' | 'leases' | 'statistics'>;

/** What every step of a provisioner cycle works with. */
export interface CycleContext {
  readonly orm: MikroORM;
  readonly config: CycleConfig;
  readonly log: Logger;
  readonly events: Events;
  readonly secrets: SecretBox;
  readonly classes: ClassCache;
  readonly workers: WorkerSnapshot;
  /** Aborted when the service stops: provider calls in flight are told to give up. */
  readonly stopping: AbortSignal;
  /** The GraphQL URL launched agents are given. */
  readonly agentServerUrl: string;
  /** The provider of a type (one per process), or null when this server has none of that type. */
  provider(type: string): Provider | null;
  readonly metrics: ProvisionerMetrics;
  /** The lease of the duty this cycle runs for (loops/leadership.ts): checked before every provider call, and in the transactions it fences. */
  readonly lease: LeaseHold;
  /** Whether a pool is this cycle's to provision (its duty: cloud pools, or the host-bound pools of this host). */
  runsHere(pool: WorkerPool): boolean;
}

/** The cycle's lease was lost (expired, taken, or given up as the process stops): the cycle stops where it is. */
export class LeaseLostError extends Error {
  constructor(duty: string) {
    super(`this process no longer leads "${duty}"`);
  }
}

/** Throws {@link LeaseLostError} unless the cycle's lease is still held (this process's own view: loops/leadership.ts). */
export function checkLease(ctx: CycleContext): void {
  if (!ctx.lease.valid()) throw new LeaseLostError(ctx.lease.duty);
}

/**
 * The fence of a write that comes before a provider call, in that write's transaction `tx`: true while
 * the cycle's lease is held in its term (the database says so, and its row stays locked until `tx` ends).
 */
export async function fence(ctx: CycleContext, tx: EntityManager): Promise<boolean> {
  return ctx.lease.valid() && (await holdsLease(tx, ctx.lease.duty, ctx.lease.holder, ctx.lease.term));
}

/** A ProviderError for anything a step caught. */
export function asProviderError(err: unknown): ProviderError {
  return err instanceof ProviderError
    ? err
    : new ProviderError('unavailable', err instanceof Error ? err.message : String(err));
}

/** Calls a pool's provider (calls.ts: its account, the timeout), if the cycle's lease is still held; throws a ProviderError, or LeaseLostError. */
export async function call<T>(
  ctx: CycleContext,
  pool: WorkerPool,
  what: string,
  run: (provider: Provider, call: ProviderCall) => Promise<T>,
): Promise<T> {
  checkLease(ctx);
  const provider = ctx.provider(pool.providerType);
  if (!provider)
    throw new ProviderError('invalid', `pool ${pool.name}: this server has no provider "${pool.providerType}"`);
  return callProvider(
    what,
    pool,
    { secrets: ctx.secrets, timeoutMs: ctx.config.providers.callTimeoutMs, stopping: ctx.stopping },
    (c) => run(provider, c),
  );
}

/**
 * Keeps a provider error on its pool for admins (lastError), and for a launch counts the failure
 * and sets when the pool may try again (pool-health.ts). `failuresBefore` is the count the cycle read.
 */
export async function recordPoolError(
  em: EntityManager,
  pool: WorkerPool,
  err: ProviderError,
  now: Date,
  launch: { failuresBefore: number; config: ProvisionerConfig } | null,
): Promise<void> {
  const fields: Record<string, unknown> = { lastError: err.message, lastErrorKind: err.kind, lastErrorAt: now };
  if (launch) {
    const failures = launch.failuresBefore + 1;
    fields.launchFailures = failures;
    fields.launchRetryAt = new Date(
      now.getTime() +
        launchRetryDelayMs(
          failures,
          needsAnAdmin(err.kind),
          launch.config.launchBackoffMs,
          launch.config.launchBackoffMaxMs,
        ),
    );
  }
  await em.nativeUpdate(WorkerPoolSchema, { id: pool.id }, fields);
}

/** A launch worked: the pool's failures are over (its last error stays for the record). */
export async function recordLaunchSuccess(em: EntityManager, pool: WorkerPool): Promise<void> {
  if (pool.launchFailures || pool.launchRetryAt)
    await em.nativeUpdate(WorkerPoolSchema, { id: pool.id }, { launchFailures: 0, launchRetryAt: null });
}
