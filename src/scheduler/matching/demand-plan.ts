/**
 * Demand (docs/design.md: provisioning demand and pools and instances) planned in memory, from what storage/demand.ts read: which pending work
 * idle slots serve, what is left to each pool and how many instances it launches or stops, and what
 * no worker and no pool could ever run. Table-tested without a database
 * (test/scheduler/matching/demand-plan.test.ts).
 */
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import type { ProvidedTagIndex } from '../../core/tags/match.js';
import { classMismatch, fitsOf, providedIndexOf, type TaskClassRow } from '../rules/fit.js';
import { staticBeforePool } from '../rules/placement-preference.js';
import { LAUNCH_LIMITS, launchRoom, poolConcurrency, type LaunchLimit } from '../rules/pool-capacity.js';
import { retiredToStop, type RetiringReason } from '../rules/instance-retirement.js';
import { minIdleNow, stopHold, stopOrder } from '../rules/scale-in.js';
import type { PoolTemplate } from './pool-template.js';
import type { ClassCache } from './class-cache.js';
import { groupBy, type WorkerState } from './worker-state.js';
import { packGroups, type PackingGroup } from './resource-packing.js';
import {
  describeResources,
  fitsResources,
  freeResources,
  offeredResources,
  type Resources,
} from '../rules/resources.js';
import { TASK_DEFAULT_RESOURCES } from '../../core/tasks/resource-request.js';

/** Seconds a task is assumed to take when its history has none (docs/design.md: provisioning demand). */
export const DEFAULT_TASK_SECONDS = 600;

export { LAUNCH_LIMITS, type LaunchLimit } from '../rules/pool-capacity.js';

/** One pool's part of the demand. */
export interface PoolDemand {
  readonly pool: WorkerPool;
  /** Pending requests its template tags can run. */
  readonly pendingRunnable: number;
  /** Of those, the ones left to this pool: not served by idle capacity nor by an earlier pool. */
  readonly pendingAssigned: number;
  /** Coming work (rules/look-ahead.ts) its template tags can run: BLOCKED requests waiting only on running work. */
  readonly comingRunnable: number;
  /** Of those, the ones left to this pool after idle capacity, pending work and earlier pools; it launches for them too. */
  readonly comingAssigned: number;
  /** Free slots of available workers (static or pooled) that can run what this pool can run. */
  readonly idleCompatibleSlots: number;
  readonly averageTaskSeconds: number;
  readonly workersRequired: number;
  readonly activeInstances: number;
  readonly startingInstances: number;
  readonly launch: number;
  readonly limitedBy: LaunchLimit[];
  /** The pool's instances' runtime this month, in seconds (pool-runtime.ts). */
  readonly monthRuntimeSeconds: number;
  /** The pool's instances' cost this month (pool-runtime.ts, rules/pool-cost.ts). */
  readonly monthCost: number;
  /** Its launches keep failing (pool-health.ts); `pool.lastError` says why. */
  readonly degraded: boolean;
  /**
   * To stop: its retired workers that hold no work (rules/instance-retirement.ts: retiredToStop), at
   * once, then its idle workers past the idle timeout, beyond the minimum kept idle.
   */
  readonly stop: WorkerState[];
  /** Of `stop`, the retired workers, with why each retired. */
  readonly retired: ReadonlyMap<number, RetiringReason>;
  /** For a pool whose machines share their resources, how its requests were packed; null for a pool with slots. */
  readonly resourcePlan: ResourcePlan | null;
}

/**
 * How a pool whose machines share their resources is sized: the requests left to it packed onto its
 * machine size (first-fit decreasing, at most its concurrency on a machine), and what fills them first.
 */
export interface ResourcePlan {
  /** What one machine offers: the pool's cpuCount, memoryGib and diskGib. */
  readonly machineSize: Resources;
  /** The requests packed (those left to the pool, pending and coming). */
  readonly requests: number;
  /** What they reserve together. */
  readonly reserved: Resources;
  /** The machines they need, by the packing. */
  readonly machines: number;
  /** Requests larger than a machine on some figure: the pool launches nothing for them. */
  readonly unplaceable: number;
  /** In words: `40 requests (80 CPUs, 80 GiB memory, 40 GiB disk) fill 5 machines of 16 CPUs, 64 GiB memory, 200 GiB disk: CPUs fill them first`. */
  readonly reason: string;
}

/** Pending requests no worker and no pool could ever run, grouped by what they require. */
export interface UnschedulableGroup {
  readonly count: number;
  readonly sampleIds: number[];
  readonly requiredTags: readonly string[];
  readonly providedTags: readonly string[];
  /** The nearest workers or pool, with what is missing on each side. */
  readonly nearest: {
    pool: string | null;
    workerNames: string[];
    workerIds: number[];
    missingOnWorker: string[];
    missingOnTask: string[];
  }[];
}

/** The whole answer. */
export interface ProvisioningDemand {
  readonly pendingTotal: number;
  /** Coming work in all (rules/look-ahead.ts), counted apart from pending work; a request no worker and no pool could run counts for nothing. */
  readonly comingTotal: number;
  readonly pools: PoolDemand[];
  /** The groups with at least one request the reader may see, with only those requests' ids. */
  readonly unschedulable: UnschedulableGroup[];
  /** Unschedulable requests of the groups the reader may see none of: counted, never described. */
  readonly hiddenUnschedulableCount: number;
}

const taskNameOf = (c: TaskClassRow) => {
  const t = c.requiredTags.find((tag) => tag.startsWith('worker:task:'));
  return t ? t.split(':')[3] : null; // worker:task:{type}:{name}:version:{v}
};

/**
 * How much pending work a pool can still take, in the two measures `workersRequired` counts: slots
 * (requests at once) and seconds of work within its target latency, for the instances it may still
 * launch plus those starting. A pool can take a request while either measure has room.
 */
class PoolRoom {
  private slots: number;
  private seconds: number;
  constructor(instances: number, concurrency: number, latencySeconds: number) {
    this.slots = instances * concurrency;
    this.seconds = instances * concurrency * latencySeconds;
  }

  /** Takes up to `n` requests of `seconds` each; returns how many it took. */
  take(n: number, seconds: number): number {
    const bySeconds = seconds > 0 ? Math.floor(this.seconds / seconds) : n;
    const k = Math.max(0, Math.min(n, Math.max(this.slots, bySeconds)));
    this.slots -= k;
    this.seconds -= k * seconds;
    return k;
  }
}

/** What demand is planned from, as storage/demand.ts reads it. */
export interface DemandInput {
  /** The pending requests per class (storage/pending-counts.ts), in class id order. */
  readonly counts: readonly { class_id: number; n: number }[];
  /** Coming work per class (storage/coming-work.ts), served after all pending work; none when absent. */
  readonly coming?: readonly { class_id: number; n: number }[];
  /** Every worker that is not terminated, in name order. */
  readonly workers: readonly WorkerState[];
  /** The enabled pools' templates, in name order. */
  readonly pools: readonly PoolTemplate[];
  /** The expected seconds of a run (storage/task-history.ts: expectedDurationSeconds), by task name. */
  readonly averageSeconds: ReadonlyMap<string, number>;
  /** Each pool's instances' runtime this month, in seconds, by pool id. */
  readonly runtime: ReadonlyMap<number, number>;
  /** Each pool's instances' cost this month, by pool id; none when absent. */
  readonly cost?: ReadonlyMap<number, number>;
  /** Each pool's committed cost this month, what its cost budget limits (storage/pool-runtime.ts), by pool id; none when absent. */
  readonly committed?: ReadonlyMap<number, number>;
  /** Each pool's launches: in the last minute, and its last one (storage/pool-launches.ts); none when absent. */
  readonly launches?: ReadonlyMap<number, { lastMinute: number; lastAt: Date | null }>;
  /** After this many failed launches in a row a pool is degraded (rules/pool-health.ts). */
  readonly degradedAfterFailures: number;
  /** The retiring pool workers with a live instance (storage/retiring-workers.ts), by worker id; none when absent. */
  readonly retiring?: ReadonlyMap<number, RetiringReason>;
  /**
   * What the pending requests of each class reserve (storage/demand.ts reads it when a pool shares its
   * resources), in groups of equal requests in queue order of their first; a class's requests past those
   * listed, and coming work, are taken to reserve the task default. None when absent.
   */
  readonly reservations?: ReadonlyMap<number, readonly PackingGroup[]>;
  /**
   * What the available workers that share their resources have free now, by worker id: their free slots serve
   * a request only while it fits (storage/worker-resources.ts). Workers not in it count slots alone.
   */
  readonly hostFree?: ReadonlyMap<number, Resources>;
}

/** Demand as planned: each pool's part, the classes no worker and no pool could run, and the groups of workers alike for every class. */
export interface DemandPlan {
  readonly pendingTotal: number;
  readonly comingTotal: number;
  readonly pools: PoolDemand[];
  readonly unschedulable: { cls: TaskClassRow; count: number }[];
  readonly workerGroups: WorkerState[][];
}

/**
 * Each class is matched against each group of workers alike for every class (one match key, whose
 * eligible classes the cache keeps) and each pool template. Free slots serve first, static workers'
 * before pool workers' (so that pools can shrink), a worker that shares its resources only while the
 * requests fit what it has free (`hostFree`); what is left goes to the pools that can run it in
 * name order, each taking what its limits leave it room for (maxActiveInstances, the month's budgets:
 * no more launches than the cost budget has room for, a backoff after failed launches) and the next pool the rest; what no pool has room for stays with
 * the first. Each pool's needs follow from the expected duration of its tasks (the median run) and its
 * target latency, within its limits. Coming work (rules/look-ahead.ts) is served the same way after all
 * pending work, by what is left; it counts for nothing where no worker and no pool could run it.
 */
export function planDemand(input: DemandInput, cache: ClassCache, now: Date): DemandPlan {
  // Static workers first, each kind in name order: their free slots serve before any pool worker's,
  // here as in the passes, so that idle pool workers can be stopped.
  const { counts, pools, runtime } = input;
  const retiring = input.retiring ?? new Map<number, RetiringReason>();
  const workers = staticBeforePool(input.workers);
  const avg = input.averageSeconds;
  const classById = new Map(cache.all().map((c) => [c.id, c]));
  const pendingTotal = counts.reduce((s, c) => s + c.n, 0);
  const workerGroups = [...groupBy(workers, (w) => cache.keyOf(w)).values()];
  // Per class, the groups that may run it, in group order (from each group's eligible classes: no class × group test).
  const groupsOfClass = new Map<number, number[]>();
  workerGroups.forEach((g, i) => {
    for (const id of cache.eligibleFor(g[0])) {
      const list = groupsOfClass.get(id);
      if (list) list.push(i);
      else groupsOfClass.set(id, [i]);
    }
  });
  const poolFits = pools.map((p) => fitsOf(p)); // each template's provided tags indexed once
  const groupFree = workerGroups.map((g) => g.reduce((sum, w) => sum + w.free, 0));
  // Idle slots are consumed once, by the first classes that can use them; each group's workers front to back.
  const slotsLeft = new Map(workers.map((w) => [w.id, w.free]));
  const groupCursor = workerGroups.map(() => 0);
  // `declined`: requests offered that its limits left no room for (they went to the next pool).
  const perPool = new Map<
    number,
    {
      runnable: number;
      assigned: number;
      comingRunnable: number;
      comingAssigned: number;
      declined: number;
      workSeconds: number;
      idleGroups: Set<number>;
      /** What the requests left to it reserve, with their expected seconds (pools that share resources only). */
      packing: (PackingGroup & { seconds: number })[];
    }
  >();
  for (const p of pools)
    perPool.set(p.pool.id, {
      runnable: 0,
      assigned: 0,
      comingRunnable: 0,
      comingAssigned: 0,
      declined: 0,
      workSeconds: 0,
      idleGroups: new Set(),
      packing: [],
    });
  const sharing = new Set(pools.filter((p) => p.pool.specifications.offersResources === true).map((p) => p.pool.id));
  // Each class's reservations, taken in order: idle slots first, then the pools (coming work: the default).
  const reservationsLeft = new Map<number, PackingGroup[]>();
  const reservationsOf = (classId: number): PackingGroup[] => {
    let left = reservationsLeft.get(classId);
    if (!left) reservationsLeft.set(classId, (left = (input.reservations?.get(classId) ?? []).map((g) => ({ ...g }))));
    return left;
  };
  const takeReservations = (classId: number, n: number, coming: boolean): PackingGroup[] => {
    if (coming) return n > 0 ? [{ request: TASK_DEFAULT_RESOURCES, n }] : [];
    const left = reservationsOf(classId);
    const taken: PackingGroup[] = [];
    while (n > 0 && left.length) {
      const k = Math.min(n, left[0].n);
      taken.push({ request: left[0].request, n: k });
      n -= k;
      if (k === left[0].n) left.shift();
      else left[0] = { request: left[0].request, n: left[0].n - k };
    }
    if (n > 0) taken.push({ request: TASK_DEFAULT_RESOURCES, n });
    return taken;
  };
  /** What the next request of the class reserves (the task default past those read, and for coming work). */
  const nextReservation = (classId: number, coming: boolean): Resources =>
    coming ? TASK_DEFAULT_RESOURCES : (reservationsOf(classId)[0]?.request ?? TASK_DEFAULT_RESOURCES);
  // What the idle workers that share their resources have free, consumed as their slots serve requests.
  const hostFree = new Map(input.hostFree ?? []);
  const readsReservations = sharing.size > 0 || hostFree.size > 0;
  // Each pool's limits, decided once: how many instances it has, may still launch, and why not more.
  const limitsOf = new Map(
    pools.map((p) => {
      const mine = workers.filter((w) => w.poolId === p.pool.id);
      // Not up yet: not connected, or connected without a fresh metadata report (an agent reports first
      // thing); a retiring worker never takes work again, whatever its connection.
      const starting = mine.filter(
        (w) => !retiring.has(w.id) && (w.unavailable === 'DISCONNECTED' || w.unavailable === 'STALE'),
      ).length;
      const used = runtime.get(p.pool.id) ?? 0;
      const monthCost = input.cost?.get(p.pool.id) ?? 0;
      const launched = input.launches?.get(p.pool.id);
      const { room, rate, overBudget, overCostBudget, budgetRoom, health, launchable } = launchRoom(
        p.pool,
        mine.length,
        used,
        now,
        input.degradedAfterFailures,
        launched?.lastMinute ?? 0,
        input.committed?.get(p.pool.id) ?? monthCost,
      );
      const concurrency = poolConcurrency(p.pool.specifications);
      return [
        p.pool.id,
        {
          mine,
          starting,
          used,
          monthCost,
          overBudget,
          overCostBudget,
          budgetRoom,
          health,
          room,
          rate,
          lastLaunchAt: launched?.lastAt ?? null,
          concurrency,
          free: new PoolRoom(launchable + starting, concurrency, p.pool.targetLatencySeconds),
        },
      ];
    }),
  );
  const unschedulable: { cls: TaskClassRow; count: number }[] = [];
  let comingTotal = 0;

  const serve = (class_id: number, n: number, coming: boolean) => {
    const cls = classById.get(class_id);
    if (!cls) return;
    const fittingGroups = groupsOfClass.get(cls.id) ?? [];
    const fittingPools = pools.filter((_, i) => poolFits[i](cls));
    if (!fittingGroups.length && !fittingPools.length) {
      if (!coming && !cls.requiredTags.includes('worker:type:not-assignable')) unschedulable.push({ cls, count: n });
      return;
    }
    if (coming) comingTotal += n;
    let residual = n;
    for (const i of fittingGroups) {
      const group = workerGroups[i];
      for (let at = groupCursor[i]; residual > 0 && at < group.length; at++) {
        const w = group[at];
        const left = slotsLeft.get(w.id) ?? 0;
        const free = hostFree.get(w.id);
        let used = 0;
        if (!free) {
          used = Math.min(left, residual);
          if (readsReservations) takeReservations(cls.id, used, coming);
        } else {
          // A worker that shares its resources serves the class's next requests while they fit what it has free
          // (rules/resources.ts), as its pulls would take them in queue order.
          for (let room = free; used < left && used < residual; used++) {
            const next = nextReservation(cls.id, coming);
            if (!fitsResources(next, room)) break;
            takeReservations(cls.id, 1, coming);
            hostFree.set(w.id, (room = freeResources(room, [next])));
          }
        }
        slotsLeft.set(w.id, left - used);
        residual -= used;
      }
      // The workers at the front with nothing left are passed for good.
      while (groupCursor[i] < group.length && (slotsLeft.get(group[groupCursor[i]].id) ?? 0) === 0) groupCursor[i]++;
      if (!residual) break;
    }
    const seconds = avg.get(taskNameOf(cls) ?? '') ?? DEFAULT_TASK_SECONDS;
    for (const p of fittingPools) {
      const d = perPool.get(p.pool.id)!;
      if (coming) d.comingRunnable += n;
      else d.runnable += n;
      for (const i of fittingGroups) d.idleGroups.add(i);
    }
    // The rest to the pools in name order, each as far as its limits let it; what none has room for stays with the first.
    const give = (poolId: number, n: number) => {
      const d = perPool.get(poolId)!;
      if (coming) d.comingAssigned += n;
      else d.assigned += n;
      d.workSeconds += n * seconds;
      if (sharing.has(poolId)) for (const g of takeReservations(cls.id, n, coming)) d.packing.push({ ...g, seconds });
      else if (readsReservations) takeReservations(cls.id, n, coming);
    };
    for (const p of fittingPools) {
      if (!residual) break;
      const took = limitsOf.get(p.pool.id)!.free.take(residual, seconds);
      if (took) give(p.pool.id, took);
      perPool.get(p.pool.id)!.declined += residual - took;
      residual -= took;
    }
    if (residual && fittingPools.length) give(fittingPools[0].pool.id, residual);
  };
  for (const { class_id, n } of counts) serve(class_id, n, false);
  for (const { class_id, n } of input.coming ?? []) serve(class_id, n, true);

  const poolDemands: PoolDemand[] = pools.map((p) => {
    const d = perPool.get(p.pool.id)!;
    const {
      mine,
      starting,
      used,
      monthCost,
      overBudget,
      overCostBudget,
      budgetRoom,
      health,
      room,
      rate,
      lastLaunchAt,
      concurrency,
    } = limitsOf.get(p.pool.id)!;
    const stopped = overBudget || overCostBudget || health.backingOff;
    const idle = mine.filter((w) => !w.unavailable && w.active === 0);
    const minIdle = minIdleNow(p.pool, now); // its warm capacity now (rules/scale-in.ts)
    const share = d.assigned + d.comingAssigned;
    const resourcePlan = sharing.has(p.pool.id) ? planResources(p.pool, d.packing, concurrency) : null;
    const workersRequired = resourcePlan
      ? Math.min(resourcePlan.machines, resourceLatencyMachines(d.packing, resourcePlan, p.pool.targetLatencySeconds))
      : Math.min(
          Math.ceil(d.workSeconds / (p.pool.targetLatencySeconds * concurrency)),
          Math.ceil(share / concurrency),
        );
    const wanted = Math.max(workersRequired - starting, minIdle - idle.length - starting, 0);
    // Why it launches fewer than its share, or passed part of it on to the next pool.
    const limitedBy: LaunchLimit[] = [];
    let launch = Math.min(wanted, room, rate, budgetRoom);
    const cut = wanted > 0 || d.declined > 0;
    if (room < wanted || (d.declined > 0 && !stopped && room <= rate && room <= budgetRoom))
      limitedBy.push(LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES);
    if (rate < wanted && rate < room && !stopped) limitedBy.push(LAUNCH_LIMITS.RATE_LIMIT);
    // Under its cost budget, but with room for fewer launches than it needs (rules/pool-capacity.ts: costBudgetRoom).
    if (
      !stopped &&
      (budgetRoom < Math.min(wanted, room, rate) || (d.declined > 0 && budgetRoom < Math.min(room, rate)))
    )
      limitedBy.push(LAUNCH_LIMITS.COST_BUDGET);
    if (overBudget && cut) {
      launch = 0;
      limitedBy.push(LAUNCH_LIMITS.MONTHLY_BUDGET);
    }
    if (overCostBudget && cut) {
      launch = 0;
      limitedBy.push(LAUNCH_LIMITS.COST_BUDGET);
    }
    if (health.backingOff && cut) {
      launch = 0;
      limitedBy.push(LAUNCH_LIMITS.BACKOFF);
    }
    // An idle worker whose free slots were counted above as serving pending work is needed, not idle; one
    // past the idle timeout waits for the scale-down delay and, billed by period, for the end of its paid one.
    const idleTooLong = idle
      .filter(
        (w) =>
          slotsLeft.get(w.id) === w.free &&
          w.idleSince &&
          now.getTime() - w.idleSince.getTime() > p.pool.idleTimeoutSeconds * 1000 &&
          stopHold(p.pool, w.instanceCreatedAt ?? null, lastLaunchAt, now) === null,
      )
      .sort((a, b) =>
        stopOrder(p.pool, now)(
          { createdAt: a.instanceCreatedAt ?? null, idleSince: a.idleSince },
          { createdAt: b.instanceCreatedAt ?? null, idleSince: b.idleSince },
        ),
      );
    // Keep the minimum idle, and keep everything when this pool still has work waiting or coming for it;
    // but a retired worker that holds nothing is stopped at once (it will never take work again).
    const retired = mine.filter((w) => retiredToStop(retiring.get(w.id), w.active));
    const stop = [...retired, ...(share > 0 ? [] : idleTooLong.slice(0, Math.max(0, idle.length - minIdle)))];
    return {
      pool: p.pool,
      pendingRunnable: d.runnable,
      pendingAssigned: d.assigned,
      comingRunnable: d.comingRunnable,
      comingAssigned: d.comingAssigned,
      idleCompatibleSlots: [...d.idleGroups].reduce((sum, i) => sum + groupFree[i], 0),
      averageTaskSeconds: share ? d.workSeconds / share : DEFAULT_TASK_SECONDS,
      workersRequired,
      activeInstances: mine.length,
      startingInstances: starting,
      launch,
      limitedBy,
      monthRuntimeSeconds: used,
      monthCost,
      degraded: health.degraded,
      stop,
      retired: new Map(retired.map((w) => [w.id, retiring.get(w.id)!])),
      resourcePlan,
    };
  });
  return { pendingTotal, comingTotal, pools: poolDemands, unschedulable, workerGroups };
}

/**
 * The packing of what a pool that shares its resources is left (rules/resources.ts: its machine size is
 * offeredResources of its specifications), and the figure that fills its machines first.
 */
function planResources(
  pool: WorkerPool,
  groups: readonly (PackingGroup & { seconds: number })[],
  concurrency: number,
): ResourcePlan {
  const machineSize = offeredResources({}, {}, pool.specifications);
  const packing = packGroups(machineSize, groups, concurrency);
  const requests = groups.reduce((sum, g) => sum + g.n, 0);
  const placed = packing.machines.reduce((sum, m) => sum + m.count, 0);
  const reserved = {
    cpus: packing.machines.reduce((sum, m) => sum + m.used.cpus, 0),
    memoryMib: packing.machines.reduce((sum, m) => sum + m.used.memoryMib, 0),
    diskMib: packing.machines.reduce((sum, m) => sum + m.used.diskMib, 0),
  };
  const machines = packing.machines.length;
  const share = (used: number, each: number) => (machines && each > 0 ? used / (machines * each) : 0);
  const fills = [
    { what: 'CPUs', share: share(reserved.cpus, machineSize.cpus) },
    { what: 'memory', share: share(reserved.memoryMib, machineSize.memoryMib) },
    { what: 'disk', share: share(reserved.diskMib, machineSize.diskMib) },
    { what: `its concurrency (${concurrency} at once)`, share: share(placed, concurrency) },
  ].sort((a, b) => b.share - a.share)[0];
  const apart = packing.unplaceable
    ? `; ${packing.unplaceable} larger than a machine (${describeResources(machineSize)}) get none`
    : '';
  const reason = machines
    ? `${placed} request${placed === 1 ? '' : 's'} (${describeResources(reserved)}) fill ${machines} machine${machines === 1 ? '' : 's'} of ${describeResources(machineSize)}: ${fills.what} fill${fills.what === 'CPUs' ? '' : 's'} them first${apart}`
    : requests
      ? `no machine: ${packing.unplaceable} request${packing.unplaceable === 1 ? '' : 's'} larger than a machine (${describeResources(machineSize)})`
      : 'no requests left to it';
  return { machineSize, requests, reserved, machines, unplaceable: packing.unplaceable, reason };
}

/**
 * The machines a pool that shares its resources needs to run what it is left within its target latency:
 * the CPU-seconds of its requests (a request that reserves no CPU counts as one) over what one machine
 * does in the target latency, and at least one when it has any.
 */
function resourceLatencyMachines(
  groups: readonly (PackingGroup & { seconds: number })[],
  plan: ResourcePlan,
  latencySeconds: number,
): number {
  const cpuSeconds = groups
    .filter((g) => fitsResources(g.request, plan.machineSize))
    .reduce((sum, g) => sum + g.n * g.seconds * Math.max(1, g.request.cpus), 0);
  if (!cpuSeconds) return 0;
  return Math.max(1, Math.ceil(cpuSeconds / (latencySeconds * Math.max(1, plan.machineSize.cpus))));
}

/**
 * The unschedulable classes described: those with a sample of requests the reader may see (`samples`,
 * the first of each class), with the nearest workers or pools and what is missing on each side; the
 * others only counted (their tags may be someone's private user tags).
 */
export function describeUnschedulable(
  plan: DemandPlan,
  pools: readonly PoolTemplate[],
  samples: readonly { class_id: number; id: number }[],
): { unschedulable: UnschedulableGroup[]; hiddenUnschedulableCount: number } {
  const { unschedulable, workerGroups } = plan;
  const sampleOf = groupBy(samples, (x) => String(x.class_id));
  const shown = unschedulable.filter(({ cls }) => sampleOf.has(String(cls.id)));
  const options = shown.length
    ? [
        ...workerGroups.map((g) => ({
          pool: null,
          workerNames: g.slice(0, 10).map((w) => w.name),
          workerIds: g.map((w) => w.id),
          index: providedIndexOf(g[0].providedTags),
          required: g[0].requiredTags,
        })),
        ...pools.map((p) => ({
          pool: p.pool.name,
          workerNames: [] as string[],
          workerIds: [] as number[],
          index: providedIndexOf(p.providedTags),
          required: p.requiredTags,
        })),
      ]
    : [];
  const groups: UnschedulableGroup[] = shown.map(({ cls, count }) => ({
    count,
    sampleIds: sampleOf.get(String(cls.id))!.map((x) => x.id),
    requiredTags: cls.requiredTags,
    providedTags: cls.significantProvidedTags,
    nearest: nearest(cls, options),
  }));
  const hiddenUnschedulableCount = unschedulable
    .filter((u) => !sampleOf.has(String(u.cls.id)))
    .reduce((sum, u) => sum + u.count, 0);
  return { unschedulable: groups, hiddenUnschedulableCount };
}

/** A group of workers or a pool as a candidate for the nearest match, its provided tags indexed once. */
interface NearestOption {
  readonly pool: string | null;
  readonly workerNames: string[];
  readonly workerIds: number[];
  readonly index: ProvidedTagIndex;
  readonly required: readonly string[];
}

function nearest(cls: TaskClassRow, options: readonly NearestOption[]): UnschedulableGroup['nearest'] {
  const missing = options.map((o) => ({ o, ...classMismatch(cls, { index: o.index, requiredTags: o.required }) }));
  const size = (m: (typeof missing)[number]) => m.missingOnWorker.length + m.missingOnTask.length;
  const best = Math.min(...missing.map(size));
  return missing
    .filter((m) => size(m) === best)
    .slice(0, 5)
    .map((m) => ({
      pool: m.o.pool,
      workerNames: m.o.workerNames,
      workerIds: m.o.workerIds,
      missingOnWorker: m.missingOnWorker,
      missingOnTask: m.missingOnTask,
    }));
}
