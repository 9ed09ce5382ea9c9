import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { intArray } from '../../storage/db/arrays.js';
import { ALWAYS, type SqlCondition } from '../../storage/db/condition.js';
import type { ClassCache } from '../matching/class-cache.js';
import { describeUnschedulable, planDemand, type ProvisioningDemand } from '../matching/demand-plan.js';
import { queueOrderSql } from '../rules/queue-order.js';
import { comingByClass } from './coming-work.js';
import { pendingByClass as countPendingByClass } from './pending-counts.js';
import { poolLaunches } from './pool-launches.js';
import { monthUseByPool } from './pool-runtime.js';
import { loadPoolTemplates } from './pool-templates.js';
import { retiringWorkers } from './retiring-workers.js';
import { expectedDurationSeconds, readDurationHistory } from './task-history.js';
import { loadWorkerStates, type WorkerSnapshot } from './worker-snapshot.js';
import type { PackingGroup } from '../matching/resource-packing.js';
import type { PoolTemplate } from '../matching/pool-template.js';
import type { WorkerState } from '../matching/worker-state.js';
import { poolConcurrency } from '../rules/pool-capacity.js';
import { RESOURCE_COLUMNS } from '../rules/resources.js';
import { freeResourcesOf } from './worker-resources.js';
import { HOST_HEADS_PER_CLASS } from '../matching/host-pass-matching.js';

const SAMPLE_IDS = 20;
/** The most pending requests of one class whose reservations demand reads (past them, the task default). */
const RESERVATIONS_PER_CLASS = 50_000;

/**
 * What the pending requests of each class reserve, grouped by equal figures, in queue order of each
 * group's first request; read only when a pool or an idle worker shares its resources, and per class only as many
 * requests as could ever be placed at once: what the idle slots and every such pool at its
 * maxActiveInstances and concurrency hold (RESERVATIONS_PER_CLASS at most); with idle hosts alone, the
 * first HOST_HEADS_PER_CLASS of each class (what a host's pull looks at). Demand packs them
 * (matching/demand-plan.ts); no more could run at once, so the rest changes no launch.
 */
async function readReservations(
  em: EntityManager,
  counts: readonly { class_id: number; n: number }[],
  pools: readonly PoolTemplate[],
  workers: readonly WorkerState[],
  idleHosts: number,
): Promise<Map<number, PackingGroup[]> | undefined> {
  const sharing = pools.filter((p) => p.pool.specifications.offersResources === true);
  const classes = counts.filter((c) => c.class_id !== null).map((c) => c.class_id);
  if ((!sharing.length && !idleHosts) || !classes.length) return undefined;
  // Without a pool that shares its resources, only the idle hosts' fit needs the figures: the first few
  // requests of each class (the task default past them).
  const limit = sharing.length
    ? Math.min(
        RESERVATIONS_PER_CLASS,
        workers.reduce((sum, w) => sum + Math.max(0, w.free), 0) +
          sharing.reduce((sum, p) => sum + p.pool.maxActiveInstances * poolConcurrency(p.pool.specifications), 0),
      )
    : HOST_HEADS_PER_CLASS;
  const c = RESOURCE_COLUMNS.workRequest;
  const rows = await em.execute<{ class_id: number; cpus: number; memory: number; disk: number; n: number }[]>(
    `select x.class_id, x.${c.cpus} as cpus, x.${c.memoryMib} as memory, x.${c.diskMib} as disk, count(*)::int as n
       from unnest(?::int[]) as k(id)
       cross join lateral (
         select s.class_id, s.${c.cpus}, s.${c.memoryMib}, s.${c.diskMib},
                row_number() over (order by ${queueOrderSql('s')}) as rank
           from work_request s where s.status = 'PENDING' and s.class_id = k.id
          order by ${queueOrderSql('s')} limit ?
       ) x
      group by 1, 2, 3, 4 order by 1, min(x.rank)`,
    [intArray(classes), limit],
  );
  const byClass = new Map<number, PackingGroup[]>();
  for (const r of rows) {
    const list = byClass.get(Number(r.class_id)) ?? [];
    list.push({ request: { cpus: Number(r.cpus), memoryMib: Number(r.memory), diskMib: Number(r.disk) }, n: r.n });
    byClass.set(Number(r.class_id), list);
  }
  return byClass;
}

/**
 * docs/design.md: provisioning demand and pools and instances in bulk: read, plan (matching/demand-plan.ts), then read the samples of what no
 * worker and no pool could run. Pending work per task class is read from the counts PostgreSQL keeps
 * (pending-counts.ts: a few hundred rows, whatever the length of the queue), the workers from the
 * process's snapshot. `visibleWork` is the reader's visibility rule for work requests
 * (services/identity/visibility.ts); by default all work is visible.
 */
export async function computeDemand(
  em: EntityManager,
  cache: ClassCache,
  config: Pick<Config, 'workers' | 'tags' | 'provisioner'>,
  now: Date,
  snapshot?: WorkerSnapshot,
  visibleWork: (alias: string) => SqlCondition = () => ALWAYS,
  /** The pending requests per class, when the caller has just counted them (the metrics do). */
  pendingByClass?: readonly { class_id: number; n: number }[],
): Promise<ProvisioningDemand> {
  await cache.refresh(em);
  const [counts, coming, workers, pools, durations, use, launches, retiring] = await Promise.all([
    (pendingByClass as { class_id: number; n: number }[] | undefined) ?? countPendingByClass(em),
    comingByClass(em),
    loadWorkerStates(em, now, config.workers.metadataFreshMs, snapshot),
    loadPoolTemplates(em, config.tags),
    // Kept per task and day as requests complete: a few rows per task, whatever the size of the history.
    readDurationHistory(em),
    monthUseByPool(em),
    poolLaunches(em),
    retiringWorkers(em),
  ]);
  // The demand plan knows a class's task by name: the expected duration of each task name (the longest
  // when two task types share a name).
  const expected = new Map<string, number>();
  for (const { taskType, taskName } of durations.tasks) {
    expected.set(
      taskName,
      Math.max(expectedDurationSeconds(durations, taskType, taskName), expected.get(taskName) ?? 0),
    );
  }
  // What the idle workers that share their resources have free: their slots serve only what fits it.
  const hostFree = await freeResourcesOf(
    em,
    workers.filter((w) => w.free > 0).map((w) => w.id),
  );
  const reservations = await readReservations(em, counts, pools, workers, hostFree.size);
  const plan = planDemand(
    {
      counts,
      reservations,
      hostFree,
      coming,
      launches,
      workers,
      pools,
      averageSeconds: expected,
      runtime: use.runtime,
      cost: use.cost,
      committed: use.committed,
      degradedAfterFailures: config.provisioner.degradedAfterFailures,
      retiring: new Map(retiring.map((r) => [r.workerId, r.reason])),
    },
    cache,
    now,
  );
  // The first requests of every unschedulable class that the reader may see, in one statement: a class
  // none of whose requests it may see is only counted (its tags may be someone's private user tags).
  const visible = visibleWork('s');
  const samples = plan.unschedulable.length
    ? await em.execute<{ class_id: number; id: number }[]>(
        `select c.id as class_id, x.id from unnest(?::int[]) as c(id)
           cross join lateral (
             select s.id from work_request s where s.status = 'PENDING' and s.class_id = c.id and ${visible.sql}
              order by ${queueOrderSql('s')} limit ?
           ) x`,
        [intArray(plan.unschedulable.map((u) => u.cls.id)), ...visible.params, SAMPLE_IDS],
      )
    : [];
  return {
    pendingTotal: plan.pendingTotal,
    comingTotal: plan.comingTotal,
    pools: plan.pools,
    ...describeUnschedulable(plan, pools, samples),
  };
}
