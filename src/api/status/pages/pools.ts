/**
 * `/-/status/pools/` and `/-/status/pools/{name}/`: each pool with its instances (state, provider
 * id, runtime, cost; for admins a link to each one's log, shown by `?log=NAME`), its demand (scheduler/storage/demand.ts), limits, budget and cost used this month
 * (scheduler/storage/pool-runtime.ts), launch health (scheduler/rules/pool-health.ts) and its offerings
 * in order, each usable or unavailable until when and why (providers/offerings.ts).
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../../core/config/config.js';
import { INSTANCE_STATES, isLiveInstance } from '../../../core/instance-state.js';
import { WorkerPoolSchema, type WorkerPool } from '../../../storage/entities/worker-pool.js';
import type { PoolDemand } from '../../../scheduler/matching/demand-plan.js';
import { poolHealth } from '../../../scheduler/rules/pool-health.js';
import { monthUseByPool } from '../../../scheduler/storage/pool-runtime.js';
import { formatCost, instanceCost, instancePrice, launchPrice } from '../../../scheduler/rules/pool-cost.js';
import { poolTagInput } from '../../../scheduler/storage/pool-templates.js';
import { isOutdated, type RetiringReason } from '../../../scheduler/rules/instance-retirement.js';
import { minIdleNow } from '../../../scheduler/rules/scale-in.js';
import type { Scheduler } from '../../../scheduler/scheduler.js';
import { isAdmin } from '../../../services/identity/auth.js';
import { listLeaders } from '../../../services/processes/leaders.js';
import { instanceLogFor } from '../../../services/pools/instances.js';
import {
  instanceCountsByPool,
  poolHasInstance,
  poolInstanceCount,
  poolInstanceRows,
  rolloutCounts as readRolloutCounts,
  type PoolInstanceRow,
  type RolloutCounts,
} from '../../../services/pools/instance-reads.js';
import { demandSeenBy, listPools } from '../../../services/pools/pool-reads.js';
import { readOfferingMarks } from '../../../services/pools/offering-marks.js';
import { offeringsOf, offeringStates, type OfferingMark } from '../../../providers/offerings.js';
import { computePoolTemplateTags } from '../../../core/tags/worker-tags.js';
import { ago, between, duration, when } from '../format.js';
import { consoleText, href, html, type Html } from '../html.js';
import { layout, type PageContext } from '../layout.js';
import { badge, pager, table, tagTable } from '../parts.js';
import { nameParam, pageNumber, StatusError } from '../request.js';

const INSTANCES_PER_PAGE = 50;
/** How much of an instance's log the pool's page shows (`?log=NAME`, admins only). */
const LOG_TAIL_BYTES = 64 * 1024;

/** An instance's name as its pool gives it: the pool's name and random hex. */
const INSTANCE_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,149}$/;

/** An instance's log for an admin, when `?log=NAME` names an instance of this pool; null otherwise. */
async function logSection(
  em: EntityManager,
  config: Pick<Config, 'providers'>,
  ctx: PageContext,
  pool: WorkerPool,
  params: Map<string, string>,
): Promise<Html | null> {
  const name = params.get('log');
  if (!name || !isAdmin(ctx.viewer)) return null;
  if (!INSTANCE_NAME.test(name))
    throw new StatusError(404, `Pool ${pool.name} has no instance “${name.slice(0, 100)}”.`);
  if (!(await poolHasInstance(em, pool.id, name)))
    throw new StatusError(404, `Pool ${pool.name} has no instance “${name}”.`);
  const log = instanceLogFor(ctx.viewer, config.providers, name, LOG_TAIL_BYTES);
  const text = log ? consoleText(log.text) : ''; // escape sequences removed, other control characters shown
  return html`<h2 id="log">Log of ${name}</h2>
${log ? html`<p class="muted">${log.truncated ? `The last ${LOG_TAIL_BYTES / 1024} KiB of ${log.bytes} bytes` : `${log.bytes} bytes`}, written ${ago(log.modifiedAt, new Date())}.</p><pre>${text}</pre>` : html`<p class="muted">No log is kept for it.</p>`}`;
}

/** A retiring instance's reason, in a few words for its badge. */
const RETIRING_WORDS: Record<RetiringReason, string> = {
  WORK_REQUESTS: 'ran its requests',
  LIFETIME: 'lifetime reached',
  OUTDATED: 'outdated',
};

const isLive = (i: PoolInstanceRow) => isLiveInstance(i.state);

/** Old and new instances of a pool (rollouts: scheduler/rules/instance-retirement.ts). */
const rollout = (c: RolloutCounts, pool: WorkerPool): string =>
  c.outdated
    ? `${c.outdated} live instance${c.outdated === 1 ? '' : 's'} on older specifications, ${c.current} on the current ones; replaced once idle, at most ${pool.maxReplacingInstances} at a time`
    : `every live instance is on the current specifications${c.unknown ? ` (${c.unknown} launched before this was recorded)` : ''}`;

/** The pool's scale-in settings and warm capacity in words (scheduler/rules/scale-in.ts). */
const scaleIn = (pool: WorkerPool, now: Date): string =>
  [
    pool.billingPeriodSeconds
      ? `billed by ${duration(pool.billingPeriodSeconds)}: idle instances stop near the end of their paid period`
      : 'billed by the second',
    pool.scaleDownDelaySeconds ? `no stop within ${duration(pool.scaleDownDelaySeconds)} of a launch` : '',
    pool.maxLaunchesPerMinute
      ? `at most ${pool.maxLaunchesPerMinute} launch${pool.maxLaunchesPerMinute === 1 ? '' : 'es'} a minute`
      : '',
    pool.warmSchedule?.periods.length
      ? `warm capacity ${pool.warmSchedule.periods.map((w) => `${w.days.join(',')} ${w.from}–${w.to}: ${w.minIdleInstances} idle`).join('; ')} (${pool.warmSchedule.timeZone}); ${minIdleNow(pool, now)} kept idle now`
      : '',
  ]
    .filter(Boolean)
    .join('; ');

/** The pool's retirement limits in words (scheduler/rules/instance-retirement.ts). */
const retirement = (pool: WorkerPool): string =>
  [
    pool.maxWorkRequestsPerInstance == null
      ? ''
      : pool.maxWorkRequestsPerInstance === 1
        ? 'a fresh instance for each work request'
        : `an instance retires after ${pool.maxWorkRequestsPerInstance} work requests`,
    pool.maxInstanceLifetimeSeconds == null
      ? ''
      : `an instance retires after ${duration(pool.maxInstanceLifetimeSeconds)}`,
  ]
    .filter(Boolean)
    .join('; ') || 'none: instances run until idle';

const budget = (pool: WorkerPool, used: number): Html =>
  pool.monthlyRuntimeBudgetSeconds
    ? html`${duration(used)} of ${duration(pool.monthlyRuntimeBudgetSeconds)} (${Math.round((100 * used) / pool.monthlyRuntimeBudgetSeconds)} %)`
    : html`${duration(used)} <span class="muted">(no budget set)</span>`;

/** Its instances' cost this month against its cost budget (scheduler/rules/pool-cost.ts). */
const costBudget = (pool: WorkerPool, used: number): Html =>
  pool.monthlyCostBudget != null
    ? html`${formatCost(used)} of ${formatCost(pool.monthlyCostBudget)}${pool.monthlyCostBudget > 0 ? html` (${Math.round((100 * used) / pool.monthlyCostBudget)} %)` : html` <span class="muted">(no launch)</span>`}`
    : html`${formatCost(used)} <span class="muted">(no cost budget set${pool.pricePerHour == null ? '; no price per hour set' : ''})</span>`;

function health(pool: WorkerPool, config: Pick<Config, 'provisioner'>, now: Date): Html {
  const h = poolHealth(pool, now, config.provisioner.degradedAfterFailures);
  if (!pool.enabled) return badge('DISABLED', 'disabled');
  if (h.degraded)
    return html`${badge('degraded')}${h.backingOff && pool.launchRetryAt ? html` <span class="muted">next try ${ago(pool.launchRetryAt, now).replace(' ago', '')}</span>` : ''}`;
  if (pool.launchFailures > 0)
    return html`${badge('PENDING', `${pool.launchFailures} failed launch${pool.launchFailures === 1 ? '' : 'es'}`)}`;
  return badge('IDLE', 'healthy');
}

const states = (counts: Map<string, number> | undefined) => {
  const parts = INSTANCE_STATES.filter((s) => counts?.get(s)).map(
    (s) => html`${badge(s, `${counts!.get(s)} ${s.toLowerCase()}`)} `,
  );
  return parts.length ? parts : html`<span class="muted">none</span>`;
};

const demandLine = (d: PoolDemand | undefined): Html =>
  d
    ? html`${d.pendingRunnable} pending it can run${d.comingRunnable ? `, ${d.comingRunnable} coming` : ''}; needs ${d.workersRequired}; ${d.activeInstances} active, ${d.startingInstances} starting; launch ${d.launch}${d.stop.length ? `, stop ${d.stop.length}` : ''}${d.limitedBy.length ? html` <span class="muted">(limited by ${d.limitedBy.join(', ').toLowerCase().replace(/_/g, ' ')})</span>` : ''}${d.resourcePlan ? html`<br><span class="muted">in resources: ${d.resourcePlan.reason}</span>` : ''}`
    : html`<span class="muted">none (disabled)</span>`;

/** An offering's price per hour in words: a spot offering costed at its maximum says so. */
const priceWords = (
  price: number | null,
  o: { market: string; maxPricePerHour: number | null; pricePerHour?: number | null },
): string =>
  price === null
    ? '—'
    : `${formatCost(price)}${o.pricePerHour == null && o.market === 'spot' && o.maxPricePerHour !== null ? ' (at most)' : ''}`;

/** An instance row's cost: its price × its runtime (scheduler/rules/pool-cost.ts), or a dash without a price. */
function instanceCostWords(pool: WorkerPool, i: PoolInstanceRow, now: Date): string {
  const price = instancePrice(i.pricePerHour, pool.pricePerHour ?? null);
  const c = instanceCost(price, i.requestedAt, i.terminatedAt ?? now, pool.billingPeriodSeconds);
  return c === null ? '—' : formatCost(c);
}

export async function poolsPage(
  em: EntityManager,
  config: Pick<Config, 'workers' | 'tags' | 'provisioner'>,
  scheduler: Scheduler,
  ctx: PageContext,
): Promise<string> {
  const now = new Date();
  const [pools, demand, { runtime, cost }, counts] = await Promise.all([
    listPools(em),
    demandSeenBy(em, scheduler, config, ctx.viewer),
    monthUseByPool(em),
    instanceCountsByPool(em),
  ]);
  // Admins see which process provisions (the leaders of the provisioner's duties: loops/leadership.ts).
  const leaders = isAdmin(ctx.viewer)
    ? (await listLeaders(em, ctx.viewer)).filter((l) => l.duty.startsWith('provisioner'))
    : [];
  const byPool = new Map(demand.pools.map((d) => [d.pool.id, d]));
  const rows = pools.map((p) => [
    html`<a href="${href(['pools', p.name])}">${p.name}</a>`,
    p.providerType,
    health(p, config, now),
    states(counts.get(p.id)),
    demandLine(byPool.get(p.id)),
    `at most ${p.maxActiveInstances} active, ${p.minIdleInstances} idle kept`,
    budget(p, runtime.get(p.id) ?? 0),
    costBudget(p, cost.get(p.id) ?? 0),
  ]);
  const unschedulable = demand.unschedulable.reduce((n, g) => n + g.count, 0) + demand.hiddenUnschedulableCount;
  const body = html`<h1>Pools</h1>
${leaders.map((l) => (l.held ? html`<p class="leader">The ${l.duty} duty is led by <strong>${l.holder}</strong> since ${when(l.acquiredAt, now)}, in term ${String(l.term)}.</p>` : html`<p class="leader error">No process leads the ${l.duty} duty now (its last leader was ${l.holder}).</p>`))}
<p>${demand.pendingTotal} request${demand.pendingTotal === 1 ? '' : 's'} pending in all${unschedulable ? html`, ${unschedulable} of them unschedulable (see the <a href="/-/status/queue/">queue</a>)` : ''}.${demand.comingTotal ? ` ${demand.comingTotal} more coming: blocked only on work that is running now.` : ''}</p>
${table(['Pool', 'Provider', 'Health', 'Instances', 'Demand', 'Limits', 'Runtime this month', 'Cost this month'], rows, 'No pools yet: static workers only.', { stack: true })}
${pools
  .filter((p) => p.lastError && poolHealth(p, now, config.provisioner.degradedAfterFailures).degraded)
  .map(
    (p) =>
      html`<p class="error"><strong><a href="${href(['pools', p.name])}">${p.name}</a></strong>: ${p.lastErrorKind ?? 'error'}: ${p.lastError}</p>`,
  )}`;
  return layout(ctx, { title: 'Pools', section: 'pools' }, body);
}

export async function poolPage(
  em: EntityManager,
  config: Pick<Config, 'workers' | 'tags' | 'provisioner' | 'providers'>,
  scheduler: Scheduler,
  ctx: PageContext,
  rawName: string,
  params: Map<string, string>,
): Promise<string> {
  const name = nameParam(rawName, 'pool', 404);
  const page = pageNumber(params);
  const pool = await em.findOne(WorkerPoolSchema, { name });
  if (!pool) throw new StatusError(404, `There is no pool “${name}”.`);
  const now = new Date();
  const offerings = offeringsOf(pool.specifications);
  const [demand, { runtime, cost }, counts, total, instances, logView, marks] = await Promise.all([
    demandSeenBy(em, scheduler, config, ctx.viewer),
    monthUseByPool(em),
    instanceCountsByPool(em),
    poolInstanceCount(em, pool.id),
    poolInstanceRows(em, pool.id, { limit: INSTANCES_PER_PAGE, offset: (page - 1) * INSTANCES_PER_PAGE }),
    logSection(em, config, ctx, pool, params),
    offerings.length ? readOfferingMarks(em, [pool.id], now) : Promise.resolve(new Map<number, OfferingMark[]>()),
  ]);
  const offeringRows = offeringStates(offerings, marks.get(pool.id) ?? [], now).map((o, i) => [
    String(i + 1),
    html`<code>${o.offering.instanceType}</code>`,
    o.offering.location ?? 'any',
    o.offering.market + (o.offering.maxPricePerHour === null ? '' : ` (at most ${o.offering.maxPricePerHour}/h)`),
    priceWords(launchPrice(o.offering, pool.pricePerHour ?? null), o.offering),
    o.unavailableUntil ? html`${badge('unavailable')} until ${when(o.unavailableUntil, now)}` : 'usable',
    o.unavailableReason ?? '',
  ]);
  const rolloutCounts = await readRolloutCounts(em, pool);
  const admin = isAdmin(ctx.viewer);
  const pages = Math.max(1, Math.ceil(total / INSTANCES_PER_PAGE));
  if (page > pages) throw new StatusError(404, `There is no page ${page}: the instances fill ${pages}.`);
  const d = demand.pools.find((p) => p.pool.id === pool.id);
  const h = poolHealth(pool, now, config.provisioner.degradedAfterFailures);
  const { handlers: _handlers, command: _command, ...publicSpecifications } = pool.specifications;
  const rows = instances.map((i) => {
    const worker = i.worker;
    return [
      worker ? html`<a href="${href(['workers', worker])}">${i.name}</a>` : i.name,
      html`${badge(i.state)}${isLive(i) && isOutdated(i.templateFingerprint, pool) ? html` ${badge('DRAINING', 'old specifications')}` : ''}${i.retiringReason && i.workerActive ? html` ${badge('DRAINING', `retiring: ${RETIRING_WORDS[i.retiringReason]}`)}` : ''}`,
      html`<code>${i.providerId ?? '—'}</code>`,
      duration(between(i.requestedAt, i.terminatedAt, now)),
      instanceCostWords(pool, i, now),
      ago(i.requestedAt, now),
      i.error ?? '',
      ...(admin ? [html`<a href="${href(['pools', pool.name], { log: i.name })}#log">log</a>`] : []),
    ];
  });
  const body = html`<p class="muted"><a href="/-/status/pools/">Pools</a> /</p>
<h1>Pool ${pool.name}</h1>
<dl class="facts">
<dt>Health</dt><dd>${health(pool, config, now)}</dd>
${pool.lastError ? html`<dt>Last error</dt><dd>${pool.lastErrorKind ?? ''}${pool.lastErrorAt ? ` (${ago(pool.lastErrorAt, now)})` : ''}: ${pool.lastError}</dd>` : ''}
${h.backingOff && pool.launchRetryAt ? html`<dt>Next launch</dt><dd>not before ${when(pool.launchRetryAt, now)}</dd>` : ''}
<dt>Provider</dt><dd>${pool.providerType}</dd>
<dt>Instances</dt><dd>${states(counts.get(pool.id))}</dd>
<dt>Demand</dt><dd>${demandLine(d)}</dd>
${d ? html`<dt>Average task</dt><dd>${duration(d.averageTaskSeconds)}; ${d.idleCompatibleSlots} idle compatible slot${d.idleCompatibleSlots === 1 ? '' : 's'} elsewhere</dd>` : ''}
<dt>Limits</dt><dd>at most ${pool.maxActiveInstances} active, ${pool.minIdleInstances} kept idle, idle timeout ${duration(pool.idleTimeoutSeconds)}, target latency ${duration(pool.targetLatencySeconds)}</dd>
<dt>Scale-in</dt><dd>${scaleIn(pool, now)}</dd>
<dt>Retirement</dt><dd>${retirement(pool)}</dd>
<dt>Rollout</dt><dd>${rollout(rolloutCounts, pool)}</dd>
<dt>Runtime this month</dt><dd>${budget(pool, runtime.get(pool.id) ?? 0)}</dd>
<dt>Price per hour</dt><dd>${pool.pricePerHour == null ? html`<span class="muted">not set</span>` : formatCost(pool.pricePerHour)}${pool.billingPeriodSeconds ? ` per instance, every started ${duration(pool.billingPeriodSeconds)} paid in full` : ' per instance, by the second'}</dd>
<dt>Cost this month</dt><dd>${costBudget(pool, cost.get(pool.id) ?? 0)}</dd>
<dt>Specifications</dt><dd><code>${JSON.stringify(publicSpecifications)}</code></dd>
</dl>
${
  offeringRows.length
    ? html`<h2>Offerings</h2>
<p class="muted">Launches try them in this order; one that failed for capacity or quota is skipped until its mark ends.</p>
${table(['#', 'Type', 'Location', 'Market', 'Price per hour', 'Now', 'Why'], offeringRows, '', { stack: true })}`
    : ''
}
<h2>Instances</h2>
${table(['Name', 'State', 'Provider id', 'Runtime', 'Cost', 'Requested', 'Error', ...(admin ? ['Log'] : [])], rows, 'No instances yet.', { stack: true })}
${pager(page, pages, (p) => href(['pools', pool.name], { page: p > 1 ? p : null }))}
${logView}
<h2>Template tags (provided)</h2>
${tagTable(computePoolTemplateTags(poolTagInput(pool), config.tags.sizeThresholds).provided)}`;
  return layout(ctx, { title: `Pool ${pool.name}`, section: 'pools' }, body);
}
