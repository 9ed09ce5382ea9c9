/**
 * Reconciliation (docs/design.md: pools and instances): a pool's instances as tagsched records them, against its provider's
 * own list. What the provider lost is TERMINATED and its work re-queued; what the provider has and
 * tagsched does not know is reported and terminated; the instance of a launch that a stopped server
 * never recorded is found by its name; an instance that never came up is FAILED; a stop not done
 * yet is asked again.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { isLiveInstance, LIVE_INSTANCE_STATES } from '../../core/instance-state.js';
import { InstanceSchema, type Instance } from '../../storage/entities/instance.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import { terminateWorkers, type InstanceEnd } from '../../services/workers/terminate.js';
import { asProviderError, call, checkLease, LeaseLostError, recordPoolError, type CycleContext } from './context.js';
import type { ProviderInstance } from '../../providers/provider.js';
import { INSTANCE_END_REASONS } from './provisioner-metrics.js';

/** A LAUNCHING instance that a cloud does not list yet is not taken as lost before this much time (lists may lag behind creation). */
const LIST_LAG_MS = 60_000;

/** What reconciling one pool did, counted. */
export interface ReconcileReport {
  /** Instances the provider no longer has: TERMINATED, their work re-queued. */
  lost: number;
  /** Instances of interrupted launches found at the provider by their name. */
  adopted: number;
  /** Instances the provider has that tagsched does not know (or already ended): terminated. */
  strays: number;
  /** LAUNCHING instances that never came up (or whose launch was interrupted and never reached the provider): FAILED. */
  failed: number;
  /** Stops asked of the provider again. */
  stopsPursued: number;
}

const emptyReport = (): ReconcileReport => ({ lost: 0, adopted: 0, strays: 0, failed: 0, stopsPursued: 0 });

/** Ends an instance (and terminates its worker, taking back its work), or only the instance when it has no worker. */
async function end(
  ctx: CycleContext,
  em: EntityManager,
  instance: Instance,
  reason: string,
  how: InstanceEnd,
  now: Date,
): Promise<void> {
  checkLease(ctx); // what the listing says is acted on by the leader that listed it only
  if (instance.worker) {
    await terminateWorkers(em, ctx.config, ctx.events, [instance.worker.id], reason, how, now);
  } else {
    await em.nativeUpdate(
      InstanceSchema,
      { id: instance.id, state: { $in: [...LIVE_INSTANCE_STATES] } },
      how.state === 'STOPPING'
        ? { state: 'STOPPING', stoppingAt: now }
        : { state: how.state, error: how.error, terminatedAt: now },
    );
  }
}

/** Asks the provider to stop an instance; failures are recorded on the pool and left for the next cycle. */
export async function askToStop(
  ctx: CycleContext,
  em: EntityManager,
  pool: WorkerPool,
  providerId: string,
  instanceId: number | null,
  now: Date,
): Promise<boolean> {
  try {
    await call(ctx, pool, 'terminate', (p, c) => p.terminate(providerId, c));
    if (instanceId !== null) await em.nativeUpdate(InstanceSchema, { id: instanceId }, { terminateRequestedAt: now });
    return true;
  } catch (err) {
    if (err instanceof LeaseLostError) throw err;
    const e = asProviderError(err);
    ctx.log.warn(
      { pool: pool.name, providerId, kind: e.kind, error: e.message },
      'the provider did not stop an instance; trying again later',
    );
    await recordPoolError(em, pool, e, now, null);
    return false;
  }
}

/** Reconciles one pool with its provider's list. A pool whose list cannot be read is left as it is (its error recorded). */
export async function reconcilePool(ctx: CycleContext, pool: WorkerPool, now: Date): Promise<ReconcileReport> {
  const report = emptyReport();
  const em = ctx.orm.em.fork();
  let listed: ProviderInstance[];
  // When the provider saw an instance end, by its id: that is when it ended, not this cycle's `now`.
  // An end dated after `now` (the instance ended while it was listed, or the provider's clock is
  // ahead of ours) is still the instance's own end, recorded at `now`: nothing is dated in the future.
  const endedAt = new Map<string, Date>();
  try {
    const all = await call(ctx, pool, 'list', (p, c) => p.list(pool.name, c));
    for (const i of all)
      if (i.state === 'gone' && i.endedAt) endedAt.set(i.id, i.endedAt.getTime() <= now.getTime() ? i.endedAt : now);
    listed = all.filter((i) => i.state !== 'gone');
  } catch (err) {
    if (err instanceof LeaseLostError) throw err;
    const e = asProviderError(err);
    ctx.log.warn(
      { pool: pool.name, kind: e.kind, error: e.message },
      'cannot list the instances of a pool; it is reconciled later',
    );
    await recordPoolError(em, pool, e, now, null);
    return report;
  }
  // The instances that may still exist, and any other record the provider's answer names.
  const names = listed.flatMap((l) => (l.name ? [l.name] : []));
  const known = await em.find(InstanceSchema, {
    pool,
    $or: [
      { state: { $in: [...LIVE_INSTANCE_STATES] } },
      { name: { $in: names } },
      { providerId: { $in: listed.map((l) => l.id) } },
    ],
  });
  const byProviderId = new Map(known.filter((k) => k.providerId).map((k) => [k.providerId!, k]));
  const byName = new Map(known.map((k) => [k.name, k]));
  const seen = new Set<number>();

  for (const l of listed) {
    const instance = byProviderId.get(l.id) ?? (l.name ? byName.get(l.name) : undefined);
    if (!instance) {
      ctx.log.warn(
        { pool: pool.name, providerId: l.id, name: l.name },
        'the provider has an instance tagsched does not know: terminating it',
      );
      if (await askToStop(ctx, em, pool, l.id, null, now)) report.strays++;
      continue;
    }
    seen.add(instance.id);
    if (!isLiveInstance(instance.state)) {
      ctx.log.warn(
        { pool: pool.name, instance: instance.name, providerId: l.id, state: instance.state },
        'the provider still has an instance that has ended: terminating it',
      );
      if (await askToStop(ctx, em, pool, l.id, null, now)) report.strays++;
      continue;
    }
    if (!instance.providerId) {
      // The server that launched it stopped before it recorded the provider's answer.
      ctx.log.info(
        { pool: pool.name, instance: instance.name, providerId: l.id },
        'found the instance of an interrupted launch',
      );
      checkLease(ctx);
      await em.nativeUpdate(InstanceSchema, { id: instance.id }, { providerId: l.id });
      instance.providerId = l.id;
      report.adopted++;
    }
    if (instance.state === 'STOPPING') {
      const askedAt = instance.terminateRequestedAt?.getTime();
      if (askedAt === undefined || now.getTime() - askedAt >= ctx.config.providers.stopGraceMs) {
        if (await askToStop(ctx, em, pool, l.id, instance.id, now)) report.stopsPursued++;
      }
    } else if (
      instance.state === 'LAUNCHING' &&
      now.getTime() - instance.requestedAt.getTime() > ctx.config.provisioner.bootTimeoutMs
    ) {
      const why = `its worker did not connect within ${ctx.config.provisioner.bootTimeoutMs / 1000} s of its launch`;
      ctx.log.warn({ pool: pool.name, instance: instance.name }, why);
      await end(ctx, em, instance, why, { state: 'FAILED', error: why }, now);
      ctx.metrics.instanceEnded(pool.name, INSTANCE_END_REASONS.BOOT_TIMEOUT);
      await askToStop(ctx, em, pool, l.id, instance.id, now);
      report.failed++;
    }
  }

  for (const instance of known) {
    if (seen.has(instance.id) || !isLiveInstance(instance.state)) continue;
    const ended = (instance.providerId && endedAt.get(instance.providerId)) || now;
    if (instance.state === 'STOPPING') {
      await end(ctx, em, instance, 'its instance stopped', { state: 'TERMINATED', error: null }, ended);
      ctx.metrics.instanceEnded(pool.name, INSTANCE_END_REASONS.STOPPED);
    } else if (!instance.providerId) {
      const why = 'its launch was interrupted and the provider has no such instance';
      ctx.log.warn({ pool: pool.name, instance: instance.name }, why);
      await end(ctx, em, instance, why, { state: 'FAILED', error: why }, now);
      ctx.metrics.instanceEnded(pool.name, INSTANCE_END_REASONS.INTERRUPTED_LAUNCH);
      report.failed++;
      continue;
    } else if (
      instance.state === 'LAUNCHING' &&
      !endedAt.has(instance.providerId) &&
      now.getTime() - instance.requestedAt.getTime() < LIST_LAG_MS
    ) {
      continue; // not listed yet, perhaps
    } else {
      const why = endedAt.has(instance.providerId)
        ? 'its instance ended by itself'
        : 'the provider no longer has its instance';
      ctx.log.warn({ pool: pool.name, instance: instance.name, providerId: instance.providerId }, why);
      await end(ctx, em, instance, why, { state: 'TERMINATED', error: why }, ended);
      ctx.metrics.instanceEnded(
        pool.name,
        endedAt.has(instance.providerId) ? INSTANCE_END_REASONS.ENDED : INSTANCE_END_REASONS.LOST,
      );
      report.lost++;
    }
    // Whatever the provider keeps of an instance it no longer runs (the local provider: its directory).
    if (instance.providerId) await askToStop(ctx, em, pool, instance.providerId, null, now);
  }
  return report;
}
