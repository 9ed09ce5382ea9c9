import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../config.js';
import { intArray } from '../../db/arrays.js';
import { ALWAYS, type SqlCondition } from '../../db/condition.js';
import type { ClassCache } from '../matching/class-cache.js';
import { describeUnschedulable, planDemand, type ProvisioningDemand } from '../matching/demand-plan.js';
import { queueOrderSql } from '../rules/queue-order.js';
import { pendingByClass as countPendingByClass } from './pending-counts.js';
import { monthRuntimeByPool } from './pool-runtime.js';
import { loadPoolTemplates } from './pool-templates.js';
import { HISTORY_DAYS } from './task-history.js';
import { loadWorkerStates, type WorkerSnapshot } from './worker-snapshot.js';

const SAMPLE_IDS = 20;

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
  config: Config,
  now: Date,
  snapshot?: WorkerSnapshot,
  visibleWork: (alias: string) => SqlCondition = () => ALWAYS,
  /** The pending requests per class, when the caller has just counted them (the metrics do). */
  pendingByClass?: readonly { class_id: number; n: number }[],
): Promise<ProvisioningDemand> {
  await cache.refresh(em);
  const [counts, workers, pools, durations, runtime] = await Promise.all([
    (pendingByClass as { class_id: number; n: number }[] | undefined) ?? countPendingByClass(em),
    loadWorkerStates(em, now, config.metadataFreshMs, snapshot),
    loadPoolTemplates(em, config),
    em.execute<{ task_name: string; seconds: number }[]>(
      // Totals kept per task and day as requests complete (services/work/work-lifecycle.ts): a few rows per
      // task, whatever the size of the history.
      `select task_name, (sum(seconds) / sum(runs))::float as seconds from task_duration
        where day > ((now() - make_interval(days => ?)) at time zone 'UTC')::date group by task_name having sum(runs) > 0`,
      [HISTORY_DAYS],
    ),
    monthRuntimeByPool(em),
  ]);
  const plan = planDemand(
    { counts, workers, pools, averageSeconds: new Map(durations.map((d) => [d.task_name, d.seconds])), runtime, degradedAfterFailures: config.degradedAfterFailures },
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
  return { pendingTotal: plan.pendingTotal, pools: plan.pools, ...describeUnschedulable(plan, pools, samples) };
}
