import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import { intArray } from '../db/arrays.js';
import type { WorkerPool } from '../entities/worker-pool.js';
import { missingTags, ProvidedTagIndex } from '../tags/match.js';
import { classFits, type ClassCache, type TaskClassRow } from './class-cache.js';
import { loadPoolTemplates, type PoolTemplate } from './pool-templates.js';
import { groupBy, loadWorkerStates, type WorkerState } from './snapshot.js';
import type { WorkerSnapshot } from './worker-snapshot.js';

/** Seconds a task is assumed to take when its history has none (DESIGN §7). */
export const DEFAULT_TASK_SECONDS = 600;
const HISTORY_DAYS = 30;
const SAMPLE_IDS = 20;

/** Why a pool launches fewer instances than it needs. */
export const LAUNCH_LIMITS = { MAX_ACTIVE_INSTANCES: 'MAX_ACTIVE_INSTANCES', MONTHLY_BUDGET: 'MONTHLY_BUDGET' } as const;
export type LaunchLimit = (typeof LAUNCH_LIMITS)[keyof typeof LAUNCH_LIMITS];

/** One pool's part of the demand. */
export interface PoolDemand {
  readonly pool: WorkerPool;
  /** Pending requests its template tags can run. */
  readonly pendingRunnable: number;
  /** Of those, the ones left to this pool: not served by idle capacity nor by an earlier pool. */
  readonly pendingAssigned: number;
  /** Free slots of available workers (static or pooled) that can run what this pool can run. */
  readonly idleCompatibleSlots: number;
  readonly averageTaskSeconds: number;
  readonly workersRequired: number;
  readonly activeInstances: number;
  readonly startingInstances: number;
  readonly launch: number;
  readonly limitedBy: LaunchLimit[];
  /** Idle pool workers past the idle timeout, beyond the minimum kept idle: to stop. */
  readonly stop: WorkerState[];
}

/** Pending requests no worker and no pool could ever run, grouped by what they require. */
export interface UnschedulableGroup {
  readonly count: number;
  readonly sampleIds: number[];
  readonly requiredTags: readonly string[];
  readonly providedTags: readonly string[];
  /** The nearest workers or pool, with what is missing on each side. */
  readonly nearest: { pool: string | null; workerNames: string[]; missingOnWorker: string[]; missingOnTask: string[] }[];
}

/** The whole answer. */
export interface ProvisioningDemand {
  readonly pendingTotal: number;
  readonly pools: PoolDemand[];
  readonly unschedulable: UnschedulableGroup[];
}

const taskNameOf = (c: TaskClassRow) => {
  const t = c.requiredTags.find((tag) => tag.startsWith('worker:task:'));
  return t ? t.split(':')[3] : null; // worker:task:{type}:{name}:version:{v}
};

/**
 * DESIGN §7 in bulk: pending work is counted per task class (one index-only scan), each class is
 * matched against each group of workers alike for every class (one match key, whose eligible
 * classes the cache keeps) and each pool template, idle capacity serves first, the rest goes to the
 * first pool (by name) that can run it and has room, and each pool's needs follow from the
 * history's average task duration and its target latency, within its limits.
 */
export async function computeDemand(em: EntityManager, cache: ClassCache, config: Config, now: Date, snapshot?: WorkerSnapshot): Promise<ProvisioningDemand> {
  await cache.refresh(em);
  const [counts, workers, pools, durations, runtime] = await Promise.all([
    em.execute<{ class_id: number; n: number }[]>(`select class_id, count(*)::int as n from work_request where status = 'PENDING' group by class_id`),
    loadWorkerStates(em, now, config.metadataFreshMs, snapshot),
    loadPoolTemplates(em, config),
    em.execute<{ task_name: string; seconds: number }[]>(
      // Totals kept per task and day as requests complete (services/work-lifecycle.ts): a few rows per
      // task, whatever the size of the history.
      `select task_name, (sum(seconds) / sum(runs))::float as seconds from task_duration
        where day > ((now() - make_interval(days => ?)) at time zone 'UTC')::date group by task_name having sum(runs) > 0`,
      [HISTORY_DAYS],
    ),
    em.execute<{ pool_id: number; seconds: number }[]>(
      `select pool_id, coalesce(sum(extract(epoch from least(coalesce(terminated_at, now()), now()) - greatest(coalesce(instance_created_at, registered_at), date_trunc('month', now())))), 0)::float as seconds
         from worker where pool_id is not null and coalesce(terminated_at, now()) >= date_trunc('month', now()) group by pool_id`,
    ),
  ]);
  const avg = new Map(durations.map((d) => [d.task_name, d.seconds]));
  const classById = new Map(cache.all().map((c) => [c.id, c]));
  const pendingTotal = counts.reduce((s, c) => s + c.n, 0);
  const workerGroups = [...groupBy(workers, (w) => cache.keyOf(w)).values()];
  const eligible = workerGroups.map((g) => new Set(cache.eligibleFor(g[0])));
  const groupFree = workerGroups.map((g) => g.reduce((sum, w) => sum + w.free, 0));
  // Idle slots are consumed once, by the first classes that can use them; each group's workers front to back.
  const slotsLeft = new Map(workers.map((w) => [w.id, w.free]));
  const groupCursor = workerGroups.map(() => 0);
  const perPool = new Map<number, { runnable: number; assigned: number; workSeconds: number; idleGroups: Set<number> }>();
  for (const p of pools) perPool.set(p.pool.id, { runnable: 0, assigned: 0, workSeconds: 0, idleGroups: new Set() });
  const unschedulable: { cls: TaskClassRow; count: number }[] = [];

  for (const { class_id, n } of counts) {
    const cls = classById.get(class_id);
    if (!cls) continue;
    const fittingGroups = workerGroups.flatMap((_, i) => (eligible[i].has(cls.id) ? [i] : []));
    const fittingPools = pools.filter((p) => classFits(cls, p));
    if (!fittingGroups.length && !fittingPools.length) {
      if (!cls.requiredTags.includes('worker:type:not-assignable')) unschedulable.push({ cls, count: n });
      continue;
    }
    let residual = n;
    for (const i of fittingGroups) {
      const group = workerGroups[i];
      while (residual > 0 && groupCursor[i] < group.length) {
        const w = group[groupCursor[i]];
        const left = slotsLeft.get(w.id) ?? 0;
        const used = Math.min(left, residual);
        slotsLeft.set(w.id, left - used);
        residual -= used;
        if (left === used) groupCursor[i]++; // this worker has nothing left
      }
      if (!residual) break;
    }
    const seconds = avg.get(taskNameOf(cls) ?? '') ?? DEFAULT_TASK_SECONDS;
    for (const p of fittingPools) {
      const d = perPool.get(p.pool.id)!;
      d.runnable += n;
      for (const i of fittingGroups) d.idleGroups.add(i);
    }
    const target = fittingPools.find((p) => p.pool.enabled);
    if (target && residual > 0) {
      const d = perPool.get(target.pool.id)!;
      d.assigned += residual;
      d.workSeconds += residual * seconds;
    }
  }

  const poolDemands: PoolDemand[] = pools.map((p) => {
    const d = perPool.get(p.pool.id)!;
    const mine = workers.filter((w) => w.poolId === p.pool.id);
    const starting = mine.filter((w) => w.unavailable === 'DISCONNECTED').length;
    const idle = mine.filter((w) => !w.unavailable && w.active === 0);
    const concurrency = Math.max(1, Number(p.pool.specifications.concurrency ?? 1) || 1);
    const byLatency = Math.ceil(d.workSeconds / (p.pool.targetLatencySeconds * concurrency));
    const workersRequired = Math.min(byLatency, Math.ceil(d.assigned / concurrency));
    const wanted = Math.max(workersRequired - starting, p.pool.minIdleInstances - idle.length - starting, 0);
    const room = Math.max(0, p.pool.maxActiveInstances - mine.length);
    const limitedBy: LaunchLimit[] = [];
    let launch = Math.min(wanted, room);
    if (launch < wanted) limitedBy.push(LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES);
    const used = runtime.find((r) => r.pool_id === p.pool.id)?.seconds ?? 0;
    if (launch > 0 && p.pool.monthlyRuntimeBudgetSeconds != null && used >= p.pool.monthlyRuntimeBudgetSeconds) {
      launch = 0;
      limitedBy.push(LAUNCH_LIMITS.MONTHLY_BUDGET);
    }
    // An idle worker whose free slots were counted above as serving pending work is needed, not idle.
    const idleTooLong = idle
      .filter((w) => slotsLeft.get(w.id) === w.free && w.idleSince && now.getTime() - w.idleSince.getTime() > p.pool.idleTimeoutSeconds * 1000)
      .sort((a, b) => a.idleSince!.getTime() - b.idleSince!.getTime());
    // Keep the minimum idle, and keep everything when this pool still has work waiting for it.
    const stop = d.assigned > 0 ? [] : idleTooLong.slice(0, Math.max(0, idle.length - p.pool.minIdleInstances));
    return {
      pool: p.pool,
      pendingRunnable: d.runnable,
      pendingAssigned: d.assigned,
      idleCompatibleSlots: [...d.idleGroups].reduce((sum, i) => sum + groupFree[i], 0),
      averageTaskSeconds: d.assigned ? d.workSeconds / d.assigned : DEFAULT_TASK_SECONDS,
      workersRequired,
      activeInstances: mine.length,
      startingInstances: starting,
      launch,
      limitedBy,
      stop,
    };
  });

  // The first requests of every unschedulable class, in one statement.
  const samples = unschedulable.length
    ? await em.execute<{ class_id: number; id: number }[]>(
        `select c.id as class_id, s.id from unnest(?::int[]) as c(id)
           cross join lateral (
             select id from work_request where status = 'PENDING' and class_id = c.id
              order by priority_base + priority_adjustment desc, created_at, id limit ?
           ) s`,
        [intArray(unschedulable.map((u) => u.cls.id)), SAMPLE_IDS],
      )
    : [];
  const sampleOf = groupBy(samples, (x) => String(x.class_id));
  const options = [
    ...workerGroups.map((g) => ({ pool: null, workerNames: g.slice(0, 10).map((w) => w.name), index: new ProvidedTagIndex(g[0].providedTags), required: g[0].requiredTags })),
    ...pools.map((p) => ({ pool: p.pool.name, workerNames: [] as string[], index: new ProvidedTagIndex(p.providedTags), required: p.requiredTags })),
  ];
  const groups: UnschedulableGroup[] = unschedulable.map(({ cls, count }) => ({
    count,
    sampleIds: (sampleOf.get(String(cls.id)) ?? []).map((x) => x.id),
    requiredTags: cls.requiredTags,
    providedTags: cls.significantProvidedTags,
    nearest: nearest(cls, options),
  }));
  return { pendingTotal, pools: poolDemands, unschedulable: groups };
}

/** A group of workers or a pool as a candidate for the nearest match, its provided tags indexed once. */
interface NearestOption {
  readonly pool: string | null;
  readonly workerNames: string[];
  readonly index: ProvidedTagIndex;
  readonly required: readonly string[];
}

function nearest(cls: TaskClassRow, options: readonly NearestOption[]): UnschedulableGroup['nearest'] {
  // As matchTags: the unsatisfied requirements of each side, once each, in their order.
  const missing = options.map((o) => ({
    o,
    missingOnWorker: [...new Set(cls.requiredTags)].filter((t) => !o.index.satisfies(t)),
    missingOnTask: missingTags(o.required, cls.significantProvidedTags),
  }));
  const size = (m: (typeof missing)[number]) => m.missingOnWorker.length + m.missingOnTask.length;
  const best = Math.min(...missing.map(size));
  return missing
    .filter((m) => size(m) === best)
    .slice(0, 5)
    .map((m) => ({ pool: m.o.pool, workerNames: m.o.workerNames, missingOnWorker: m.missingOnWorker, missingOnTask: m.missingOnTask }));
}
