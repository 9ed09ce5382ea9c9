/**
 * One provisioner cycle (docs/design.md: pools and instances), run by one server process at a time (provisioner.ts holds the
 * lock): reconcile every pool with its provider (periodic cycles only: lists cost API calls), retire,
 * read the demand, stop the idle workers it lists, ask the providers to stop what is STOPPING, and
 * launch what it says (with the provisioner off: only retire). Every step records in the database before it calls a provider, so that a
 * server stopped at any point leaves a state the next cycle, in any process, can finish.
 */
import { LAUNCHING_OR_RUNNING_SQL } from '../../core/instance-state.js';
import { InstanceSchema } from '../../storage/entities/instance.js';
import { WorkerImageSchema } from '../../storage/entities/worker-image.js';
import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import { recordBudgetedLaunch } from '../../services/pools/instances.js';
import { readOfferingMarks, recordOfferingMarks } from '../../services/pools/offering-marks.js';
import { launchSpecifications } from '../../services/pools/publications.js';
import { publishTermination, terminateIn, terminateWorkers } from '../../services/workers/terminate.js';
import { activeWorkSql } from '../../scheduler/rules/active-work.js';
import { rateRoom } from '../../scheduler/rules/scale-in.js';
import { intArray } from '../../storage/db/arrays.js';
import { computeDemand } from '../../scheduler/storage/demand.js';
import { retryingDeadlocks } from '../../storage/db/deadlocks.js';
import {
  asProviderError,
  call,
  checkLease,
  fence,
  LeaseLostError,
  recordLaunchSuccess,
  recordPoolError,
  type CycleContext,
} from './context.js';
import { planCycle } from './plan.js';
import { accountKey, scrubFailures } from './calls.js';
import { ProviderError } from '../../providers/provider.js';
import { launchChoice, marksFor, offeringKey, offeringsOf, type OfferingFailure } from '../../providers/offerings.js';
import { launchPrice } from '../../scheduler/rules/pool-cost.js';
import { askToStop, reconcilePool, type ReconcileReport } from './reconcile.js';
import { INSTANCE_END_REASONS, type InstanceEndReason } from './provisioner-metrics.js';
import { retireOutdated, retireOutlived, retiredIdle, retiredWhy } from './retire.js';
import { cloudInitUserData, type AgentBootstrap } from '../../providers/user-data.js';

/** What a cycle did, counted (logged, and returned to tests and the bench). */
export interface CycleReport extends ReconcileReport {
  readonly reconciled: boolean;
  launched: number;
  launchFailures: number;
  stopped: number;
}

/** The decisions of a cycle: the demand, and what it makes the provisioner do (for the bench: no provider is called). */
export async function decide(ctx: CycleContext, now: Date) {
  const em = ctx.orm.em.fork();
  const [demand, rows] = await Promise.all([
    computeDemand(em, ctx.classes, ctx.config, now, ctx.workers),
    em.execute<{ worker_id: number }[]>(
      `select worker_id from instance where state in (${LAUNCHING_OR_RUNNING_SQL}) and worker_id is not null`,
    ),
  ]);
  return { demand, plan: planCycle(demand, new Set(rows.map((r) => r.worker_id))) };
}

/**
 * Stops an idle worker: terminated under its lock if it still holds nothing (never one holding work), its
 * instance STOPPING. `why` says why in the worker's record and the log (an idle timeout by default, or its retirement).
 */
async function stopIdle(
  ctx: CycleContext,
  workerId: number,
  pool: WorkerPool,
  now: Date,
  why: { text: string; reason: InstanceEndReason } = {
    text: `idle for longer than the idle timeout of pool ${pool.name}`,
    reason: INSTANCE_END_REASONS.IDLE,
  },
): Promise<boolean> {
  const done = await retryingDeadlocks(() =>
    ctx.orm.em.fork().transactional(async (tx) => {
      if (!(await fence(ctx, tx))) throw new LeaseLostError(ctx.lease.duty);
      const [w] = await tx.execute<{ id: number }[]>(
        `select id from worker where id = ? and terminated_at is null for update`,
        [workerId],
      );
      if (!w) return null;
      // Counted after the lock: an assignment committed before it is seen, none can come after it.
      const [{ active }] = await tx.execute<{ active: number }[]>(`select ${activeWorkSql('?')} as active`, [workerId]);
      if (active) return null;
      return terminateIn(tx, ctx.config, [workerId], why.text, { state: 'STOPPING' }, now);
    }),
  );
  if (!done?.workers.length) return false;
  publishTermination(ctx.events, done);
  ctx.metrics.instanceEnded(pool.name, why.reason);
  ctx.log.info({ pool: pool.name, worker: done.workers[0].name, why: why.text }, 'stopping an idle instance');
  return true;
}

/** Asks the providers to stop every STOPPING instance they were not asked about yet. */
async function pursueStops(ctx: CycleContext, pools: readonly WorkerPool[], now: Date): Promise<void> {
  const em = ctx.orm.em.fork();
  const stopping = await em.find(InstanceSchema, {
    state: 'STOPPING',
    terminateRequestedAt: null,
    providerId: { $ne: null },
  });
  for (const instance of stopping) {
    const pool = pools.find((p) => p.id === instance.pool.id);
    if (pool) await askToStop(ctx, em, pool, instance.providerId!, instance.id, now);
  }
}

/**
 * Launches up to `count` instances of a pool, one after the other, each recorded (worker, bound
 * activation token, instance LAUNCHING) before its provider is asked, and only while the pool's
 * committed cost is below its monthly cost budget (recordBudgetedLaunch checks it in that transaction). The provider is handed the
 * pool's offerings that are not marked unavailable (providers/offerings.ts), tries them in order, and
 * reports those that failed for capacity or quota: they are marked (offering-marks.ts) whether the
 * launch worked or not. The first failure ends the pool's launches for this cycle: its instance is
 * FAILED with the error, its worker terminated, and the pool backs off (pool-health.ts). A pool
 * whose every offering is marked fails its launch without asking its provider, naming each.
 */
async function launch(
  ctx: CycleContext,
  pool: WorkerPool,
  count: number,
  report: CycleReport,
  now: Date,
  sameAccount: readonly number[] = [pool.id],
): Promise<void> {
  const em = ctx.orm.em.fork();
  const imageName = typeof pool.specifications.image === 'string' ? pool.specifications.image : null;
  const registered = imageName === null ? null : await em.findOne(WorkerImageSchema, { name: imageName });
  const image = registered ? { name: registered.name, manifest: registered.manifest } : null;
  const offerings = offeringsOf(pool.specifications);
  const mark = (failures: readonly OfferingFailure[]) =>
    recordOfferingMarks(
      em,
      pool.id,
      marksFor(failures, new Date(), ctx.config.provisioner.offeringUnavailableMs),
      new Date(),
    );
  for (let i = 0; i < count && !ctx.stopping.aborted; i++) {
    if (ctx.config.provisioner.accountLaunchesPerMinute > 0) {
      // The account's launch rate (TAGSCHED_ACCOUNT_LAUNCHES_PER_MINUTE), over every pool that shares it.
      const [{ n }] = await em.execute<{ n: number }[]>(
        `select count(*)::int as n from instance where pool_id = any(?::int[]) and requested_at > now() - interval '1 minute'`,
        [intArray(sameAccount)],
      );
      if (rateRoom({ maxLaunchesPerMinute: ctx.config.provisioner.accountLaunchesPerMinute }, n) === 0) {
        ctx.log.info(
          { pool: pool.name, launched: n, limit: ctx.config.provisioner.accountLaunchesPerMinute },
          'launches held back: the provider account launched its most this minute',
        );
        return;
      }
    }
    const marks = offerings.length ? ((await readOfferingMarks(em, [pool.id], new Date())).get(pool.id) ?? []) : [];
    const choice = launchChoice(offerings, marks, new Date());
    if (choice.failure) {
      const e = new ProviderError('capacity', `pool ${pool.name}: ${choice.failure}`, 'offerings_unavailable');
      report.launchFailures++;
      ctx.metrics.launchFailed(pool.name, e.kind);
      ctx.log.warn({ pool: pool.name, kind: e.kind, code: e.providerCode, error: e.message }, 'launch not tried');
      await recordPoolError(em, pool, e, now, { failuresBefore: pool.launchFailures, config: ctx.config.provisioner });
      return;
    }
    // The lease, the instance cap and the cost budget, checked for each launch in the transaction that records it.
    const recorded = await recordBudgetedLaunch(em.fork(), ctx.config.tags, pool, new Date(), (tx) => fence(ctx, tx));
    if ('refused' in recorded) {
      if (recorded.refused === 'lease') throw new LeaseLostError(ctx.lease.duty);
      ctx.log.info(
        { pool: pool.name, launched: i, wanted: count, limit: recorded.refused },
        recorded.refused === 'budget'
          ? 'launches held back: the pool’s committed cost this month reached its monthly cost budget'
          : 'launches held back: the pool has its maxActiveInstances',
      );
      return;
    }
    const record = recorded;
    ctx.events.publish('workerChanged', { id: record.worker.id, name: record.worker.name });
    const agent: AgentBootstrap = {
      serverUrl: ctx.agentServerUrl,
      activationToken: record.activationToken,
      workerName: record.worker.name,
    };
    try {
      const { id, unavailable, offering, pricePerHour } = await call(ctx, pool, 'launch', async (p, c) => {
        // A pool naming a published image and no providerImage boots the image's id for its provider and region.
        const specifications = await launchSpecifications(em.fork(), pool.providerType, pool.specifications, c.account);
        // Checked again after that read: a process paused during it must not launch once it resumes.
        checkLease(ctx);
        const launched = await p.launch(
          {
            pool: pool.name,
            name: record.instance.name,
            specifications,
            agent,
            userData: cloudInitUserData(agent),
            image,
            offerings: choice.usable,
          },
          { ...c, pool: { ...c.pool, specifications } },
        );
        return { ...launched, unavailable: scrubFailures(launched.unavailable ?? [], c.account) };
      });
      // Its provider id first: from here the machine exists, and nothing after may make it untracked.
      // Its price (scheduler/rules/pool-cost.ts), now that the offering that started it, and the provider's price, are known.
      const started = offering === undefined ? undefined : choice.usable.find((o) => offeringKey(o) === offering);
      const known = started !== undefined || pricePerHour != null;
      const price = known
        ? {
            pricePerHour: launchPrice(
              started ?? offeringsOf(pool.specifications)[0],
              pool.pricePerHour ?? null,
              pricePerHour ?? null,
            ),
          }
        : {};
      await em.nativeUpdate(InstanceSchema, { id: record.instance.id }, { providerId: id, ...price });
      // The offerings that failed before the one that started it; a failure to note them is logged, not a failed launch.
      await mark(unavailable).catch((err: unknown) =>
        ctx.log.warn(
          { pool: pool.name, instance: record.instance.name, err: err instanceof Error ? err.message : String(err) },
          'could not mark unavailable offerings',
        ),
      );
      await recordLaunchSuccess(em, pool);
      pool.launchFailures = 0;
      pool.launchRetryAt = null;
      report.launched++;
      ctx.metrics.launched(pool.name);
      ctx.log.info({ pool: pool.name, instance: record.instance.name, providerId: id, offering }, 'instance launched');
    } catch (err) {
      // Recorded and not asked: the next leader's reconciliation ends it (reconcile.ts: an interrupted launch).
      // A lease lost inside the call reaches here as the provider error callProvider made of it.
      if (err instanceof LeaseLostError || !ctx.lease.valid()) throw new LeaseLostError(ctx.lease.duty);
      const e = asProviderError(err);
      await mark(e.offeringFailures);
      report.launchFailures++;
      ctx.metrics.launchFailed(pool.name, e.kind);
      ctx.log.warn(
        { pool: pool.name, instance: record.instance.name, kind: e.kind, code: e.providerCode, error: e.message },
        'launch failed',
      );
      await terminateWorkers(
        em,
        ctx.config,
        ctx.events,
        [record.worker.id],
        'its launch failed',
        { state: 'FAILED', error: e.message },
        new Date(),
      );
      await recordPoolError(em, pool, e, now, { failuresBefore: pool.launchFailures, config: ctx.config.provisioner });
      return;
    }
  }
}

/**
 * The retirements (scheduler/rules/instance-retirement.ts): outlived and outdated workers drained, and
 * every retired worker that holds nothing stopped: its worker terminated, its instance STOPPING (for
 * the provider, or a site's own script, to stop).
 */
async function retire(ctx: CycleContext, pools: readonly WorkerPool[], report: CycleReport, now: Date): Promise<void> {
  await retireOutlived(ctx, now);
  await retireOutdated(ctx, pools);
  for (const r of await retiredIdle(ctx)) {
    const pool = pools.find((p) => p.id === r.poolId);
    if (pool && (await stopIdle(ctx, r.workerId, pool, now, r.why))) report.stopped++;
  }
}

/**
 * Runs the body of one cycle; `reconcile` adds the lists of every provider. In a process with the
 * provisioner off (TAGSCHED_PROVISIONER=off: a site's own script launches and stops the machines) a
 * cycle is only the retirements, which call no provider: the script sees a retired worker DRAINING,
 * in its pool's `stopWorkers` once it holds nothing, and then its instance STOPPING.
 */
export async function runCycleBody(
  ctx: CycleContext,
  options: { reconcile: boolean },
  now = new Date(),
): Promise<CycleReport> {
  const on = ctx.config.provisioner.enabled;
  const report: CycleReport = {
    reconciled: on && options.reconcile,
    lost: 0,
    adopted: 0,
    strays: 0,
    failed: 0,
    stopsPursued: 0,
    launched: 0,
    launchFailures: 0,
    stopped: 0,
  };
  try {
    await cycleSteps(ctx, options, report, now);
  } catch (err) {
    // The lease is gone (expired while the cycle ran, or taken): the cycle stops; its leader's next one finishes.
    if (!(err instanceof LeaseLostError)) throw err;
    ctx.log.warn(
      { duty: ctx.lease.duty, term: ctx.lease.term, ...report },
      'provisioner cycle stopped: its lease was lost',
    );
  }
  return report;
}

async function cycleSteps(
  ctx: CycleContext,
  options: { reconcile: boolean },
  report: CycleReport,
  now: Date,
): Promise<void> {
  const on = ctx.config.provisioner.enabled;
  const pools = (await ctx.orm.em.fork().find(WorkerPoolSchema, {}, { orderBy: { name: 'asc' } })).filter((p) =>
    ctx.runsHere(p),
  );
  // A site without pools has nothing to provision: every step below is about pools, their instances
  // and their workers, and the demand would read every worker's state for no pool to serve.
  if (!pools.length) return;
  checkLease(ctx);
  if (!on) {
    await retire(ctx, pools, report, now);
    return;
  }
  if (options.reconcile) {
    for (const pool of pools) {
      const r = await reconcilePool(ctx, pool, now);
      for (const key of ['lost', 'adopted', 'strays', 'failed', 'stopsPursued'] as const) report[key] += r[key];
    }
  }
  // Retired workers first: stopped as soon as they are idle, so that the demand read next no longer
  // counts them and launches their replacements in this cycle.
  checkLease(ctx);
  await retire(ctx, pools, report, now);
  const { plan } = await decide(ctx, now);
  checkLease(ctx);
  for (const stop of plan.stops) {
    if (!ctx.runsHere(stop.pool)) continue;
    const { name, maxWorkRequestsPerInstance, maxInstanceLifetimeSeconds } = stop.pool;
    // One that retired since the retirements above were read: stopped for its retirement.
    const why = stop.retired
      ? retiredWhy(stop.retired, {
          name,
          maxWorkRequestsPerInstance: maxWorkRequestsPerInstance ?? null,
          maxInstanceLifetimeSeconds: maxInstanceLifetimeSeconds ?? null,
        })
      : undefined;
    if (await stopIdle(ctx, stop.workerId, stop.pool, now, why)) report.stopped++;
  }
  await pursueStops(ctx, pools, now);
  // Pools that launch on one provider account share its launch rate (TAGSCHED_ACCOUNT_LAUNCHES_PER_MINUTE).
  const keys =
    ctx.config.provisioner.accountLaunchesPerMinute > 0
      ? new Map(pools.map((p) => [p.id, accountKey(p, ctx.secrets)]))
      : null;
  for (const { pool, count } of plan.launches) {
    const mine = pools.find((p) => p.id === pool.id);
    if (!mine) continue; // another duty's pool (a host-bound pool of another host)
    const sameAccount = keys ? pools.filter((p) => keys.get(p.id) === keys.get(pool.id)).map((p) => p.id) : [pool.id];
    await launch(ctx, mine, count, report, now, sameAccount);
  }
}
