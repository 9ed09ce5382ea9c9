/**
 * The gauges that come from the database, computed at each scrape into a registry of that scrape
 * (two scrapes at once never share values): the unfinished work requests by workspace and status,
 * the pending ones by task class (with its task and architecture) and the oldest one's age, the active
 * workers by status and pool, the live instances by pool and state, and each pool's demand, health,
 * limits, runtime and cost, and the estimated wait of the classes with the most pending. Every process
 * answers the same values; they cost six statements, the demand's own and the estimates' (a dozen).
 *
 * Workspace labels: a scraper with TAGSCHED_METRICS_TOKEN sees every workspace by name; without
 * a token configured, private workspaces are summed into one label value (PRIVATE_WORKSPACE), so
 * that nobody learns their names or their number from /metrics.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import { Gauge, Registry } from 'prom-client';
import type { Config } from '../../core/config/config.js';
import { LIVE_INSTANCE_STATES } from '../../core/instance-state.js';
import { workspaceNames } from '../../services/identity/directory-reads.js';
import { liveInstancesByPool } from '../../services/pools/instance-reads.js';
import { oldestPendingSince, unfinishedByWorkspace } from '../../services/work/work-counts.js';
import { activeWorkerRows } from '../../services/workers/worker-lists.js';
import { computeDemand } from '../../scheduler/storage/demand.js';
import { createLoaders } from '../loaders.js';
import { ESTIMATED_CLASSES, estimateClassHeads } from '../../services/work/diagnose-request.js';
import { LAUNCH_LIMITS } from '../../scheduler/rules/pool-capacity.js';
import { pendingByClass as countPendingByClass } from '../../scheduler/storage/pending-counts.js';
import type { Scheduler } from '../../scheduler/scheduler.js';

/** The label value every private workspace is counted under when names are not shown. */
export const PRIVATE_WORKSPACE = '(private)';
/** The pool label value of workers that belong to no pool (static workers). */
export const NO_POOL = '';
/** The statuses the work-request gauge counts: the unfinished ones (finished ones grow with history). */

interface Deps {
  orm: MikroORM;
  config: Pick<Config, 'workers' | 'tags' | 'provisioner'>;
  scheduler: Scheduler;
}

/**
 * A class's readable labels from its required tags: the task (`TYPE:NAME`, from `worker:task:TYPE:NAME:…`)
 * and the architecture (from `worker:build-arch:ARCH`; "" when it requires none). Both are bounded: task
 * names come from the task registry, architectures from the tag ontology's values.
 */
export function classLabels(requiredTags: readonly string[]): { task: string; architecture: string } {
  const task = requiredTags.find((t) => t.startsWith('worker:task:'));
  const arch = requiredTags.find((t) => t.startsWith('worker:build-arch:'));
  return {
    task: task ? task.split(':').slice(2, 4).join(':') : '',
    architecture: arch ? arch.slice('worker:build-arch:'.length) : '',
  };
}

const gauge = (registry: Registry, name: string, help: string, labelNames: readonly string[] = []) =>
  new Gauge({ name, help, labelNames, registers: [registry] });

/** Reads the database gauges into a new registry. */
export async function collectDatabaseMetrics(deps: Deps, options: { workspaceNames: boolean }): Promise<Registry> {
  const started = performance.now();
  const registry = new Registry();
  const em = deps.orm.em.fork();
  const now = new Date();

  // By workspace and status: an index-only scan of work_request_unfinished_workspace; pending by class:
  // the counts PostgreSQL keeps (scheduler/storage/pending-counts.ts).
  const byStatus = await unfinishedByWorkspace(em);
  const pendingByClass = await countPendingByClass(em, { classified: true });
  const workspaces = await workspaceNames(em);
  const workspaceLabel = new Map(
    workspaces.map((w) => [w.id, w.is_public || options.workspaceNames ? w.name : PRIVATE_WORKSPACE]),
  );
  const requests = gauge(
    registry,
    'tagsched_work_requests',
    'Unfinished work requests (BLOCKED, PENDING, ASSIGNED, RUNNING) by workspace and status',
    ['workspace', 'status'],
  );
  const byWorkspace = new Map<string, number>();
  for (const g of byStatus) {
    const key = JSON.stringify([workspaceLabel.get(g.workspace_id) ?? PRIVATE_WORKSPACE, g.status]);
    byWorkspace.set(key, (byWorkspace.get(key) ?? 0) + g.n);
  }
  for (const [key, n] of byWorkspace) {
    const [workspace, status] = JSON.parse(key) as [string, string];
    requests.set({ workspace, status }, n);
  }
  const pending = gauge(
    registry,
    'tagsched_pending_work_requests',
    "PENDING work requests by task class id, with the class's task and architecture (one series per class with pending work)",
    ['class', 'task', 'architecture'],
  );
  await deps.scheduler.classes.refresh(em);
  for (const c of pendingByClass)
    pending.set(
      { class: String(c.class_id), ...classLabels(deps.scheduler.classes.get(c.class_id)?.requiredTags ?? []) },
      c.n,
    );
  // The wait of each class's next request (its queue's head), for the classes with the most pending
  // (ESTIMATED_CLASSES at most): services/work/start-estimate.ts, in its bounded number of statements.
  const estimates = await estimateClassHeads(
    em,
    createLoaders(em, deps.config, deps.scheduler.workers, deps.scheduler),
    [...pendingByClass].sort((a, b) => b.n - a.n || a.class_id - b.class_id).map((c) => c.class_id),
  );
  const wait = gauge(
    registry,
    'tagsched_estimated_wait_seconds',
    `Seconds until the next PENDING request of a task class is expected to start (its start estimate), by class id with its task and architecture; for the ${ESTIMATED_CLASSES} classes with the most pending, those with an estimate`,
    ['class', 'task', 'architecture'],
  );
  const estimateError = gauge(
    registry,
    'tagsched_start_estimate_error_seconds',
    'The median absolute error of the last start estimates of a task class (at most 100), by class id with its task and architecture; for the classes of tagsched_estimated_wait_seconds whose estimates were checked',
    ['class', 'task', 'architecture'],
  );
  for (const [classId, e] of estimates) {
    const labels = { class: String(classId), ...classLabels(deps.scheduler.classes.get(classId)?.requiredTags ?? []) };
    if (e.waitSeconds !== null) wait.set(labels, Math.max(0, e.waitSeconds));
    if (e.medianAbsoluteErrorSeconds !== null) estimateError.set(labels, e.medianAbsoluteErrorSeconds);
  }
  const oldest = await oldestPendingSince(em);
  gauge(
    registry,
    'tagsched_oldest_pending_seconds',
    'How long the oldest PENDING work request has been waiting (since it last became PENDING); 0 with none',
  ).set(oldest ? Math.max(0, (now.getTime() - oldest.getTime()) / 1000) : 0);

  const workers = await activeWorkerRows(em, deps.config.workers.metadataFreshMs);
  const workerGauge = gauge(
    registry,
    'tagsched_workers',
    'Active workers (terminated pool workers left out) by status and pool ("" for no pool)',
    ['status', 'pool'],
  );
  const workerCounts = new Map<string, number>();
  for (const w of workers) {
    const key = JSON.stringify([w.status, w.pool ?? NO_POOL]);
    workerCounts.set(key, (workerCounts.get(key) ?? 0) + 1);
  }
  for (const [key, n] of workerCounts) {
    const [status, pool] = JSON.parse(key) as [string, string];
    workerGauge.set({ status, pool }, n);
  }

  // Live instances only (terminated and failed ones grow with history), with a zero for every pool
  // and live state so that a series does not vanish when a pool stops its last instance.
  const instances = await liveInstancesByPool(em);
  const instanceGauge = gauge(
    registry,
    'tagsched_instances',
    `Instances by pool and state, live states only (${LIVE_INSTANCE_STATES.join(', ')})`,
    ['pool', 'state'],
  );
  for (const { pool } of instances) for (const state of LIVE_INSTANCE_STATES) instanceGauge.set({ pool, state }, 0);
  for (const i of instances) if (i.state !== null) instanceGauge.set({ pool: i.pool, state: i.state }, i.n);

  const demand = await computeDemand(
    em,
    deps.scheduler.classes,
    deps.config,
    now,
    deps.scheduler.workers,
    undefined,
    pendingByClass,
  );
  const launch = gauge(
    registry,
    'tagsched_pool_launch',
    'Instances each enabled pool should launch now (provisioning demand)',
    ['pool'],
  );
  const required = gauge(
    registry,
    'tagsched_pool_workers_required',
    'Workers each enabled pool needs for the pending work left to it (provisioning demand)',
    ['pool'],
  );
  const runnable = gauge(
    registry,
    'tagsched_pool_pending_runnable',
    'Pending work requests each enabled pool could run',
    ['pool'],
  );
  const degraded = gauge(
    registry,
    'tagsched_pool_degraded',
    'Whether each enabled pool is degraded (1): its launches keep failing, or failed in a way only an admin can cure',
    ['pool'],
  );
  const limited = gauge(
    registry,
    'tagsched_pool_launch_limited',
    'Whether a limit keeps each enabled pool from launching what its demand asks (1), by limit',
    ['pool', 'limit'],
  );
  const runtime = gauge(
    registry,
    'tagsched_pool_month_runtime_seconds',
    "Each enabled pool's instances' runtime this calendar month (UTC)",
    ['pool'],
  );
  const budget = gauge(
    registry,
    'tagsched_pool_month_runtime_budget_seconds',
    "Each enabled pool's monthly runtime budget (pools with one)",
    ['pool'],
  );
  const cost = gauge(
    registry,
    'tagsched_pool_month_cost',
    "Each enabled pool's instances' cost this calendar month (UTC), in the currency of its prices (0 without prices)",
    ['pool'],
  );
  const costBudget = gauge(
    registry,
    'tagsched_pool_month_cost_budget',
    "Each enabled pool's monthly cost budget (pools with one)",
    ['pool'],
  );
  for (const d of demand.pools) {
    launch.set({ pool: d.pool.name }, d.launch);
    required.set({ pool: d.pool.name }, d.workersRequired);
    runnable.set({ pool: d.pool.name }, d.pendingRunnable);
    degraded.set({ pool: d.pool.name }, d.degraded ? 1 : 0);
    for (const limit of Object.values(LAUNCH_LIMITS))
      limited.set({ pool: d.pool.name, limit }, d.limitedBy.includes(limit) ? 1 : 0);
    runtime.set({ pool: d.pool.name }, d.monthRuntimeSeconds);
    if (d.pool.monthlyRuntimeBudgetSeconds != null)
      budget.set({ pool: d.pool.name }, d.pool.monthlyRuntimeBudgetSeconds);
    cost.set({ pool: d.pool.name }, d.monthCost);
    if (d.pool.monthlyCostBudget != null) costBudget.set({ pool: d.pool.name }, d.pool.monthlyCostBudget);
  }
  gauge(
    registry,
    'tagsched_unschedulable_work_requests',
    'Pending work requests that no worker and no pool could ever run',
  ).set(demand.unschedulable.reduce((sum, g) => sum + g.count, 0));
  gauge(registry, 'tagsched_metrics_database_seconds', 'How long this scrape took to read the database gauges').set(
    (performance.now() - started) / 1000,
  );
  return registry;
}
