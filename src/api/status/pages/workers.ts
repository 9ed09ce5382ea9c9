/** `/-/status/workers/`: the active workers, counted per status, filtered by status, pool and tag, paged. */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../../core/config/config.js';
import { canSeeWorkerDetails, principalOf, type Principal } from '../../../services/identity/visibility.js';
import { listPools } from '../../../services/pools/pool-reads.js';
import { activeWorkerRows, type WorkerRow } from '../../../services/workers/worker-lists.js';
import { WORKER_STATUSES, type WorkerStatus } from '../../../scheduler/rules/availability.js';
import { ago } from '../format.js';
import { href, html } from '../html.js';
import { layout, type PageContext } from '../layout.js';
import { badge, pager, table } from '../parts.js';
import { nameParam, oneOfParam, pageNumber, StatusError, tagParam } from '../request.js';

export const PAGE_SIZE = 50;

/** How a worker status reads. */
export const STATUS_LABELS: Record<WorkerStatus, string> = {
  IDLE: 'Idle',
  BUSY: 'Running work',
  DRAINING: 'Draining',
  DISCONNECTED: 'Disconnected',
  STALE: 'Connected, metadata not fresh',
  QUARANTINED: 'Quarantined',
  DISABLED: 'Disabled',
  INACTIVE: 'Inactive',
};

/** The `pool` filter value for workers in no pool. */
export const STATIC_POOL = '-';

/** Workers per status. */
export function countByStatus(rows: readonly WorkerRow[]): Map<WorkerStatus, number> {
  const counts = new Map<WorkerStatus, number>();
  for (const r of rows) counts.set(r.status, (counts.get(r.status) ?? 0) + 1);
  return counts;
}

/** Whether the principal may see the details of workers other than itself (the rule of services/identity/visibility.ts, asked of no worker in particular). */
export const seesOtherWorkersDetails = (principal: Principal): boolean => canSeeWorkerDetails(principal, { id: -1 });

const SHOWN_STATUSES = WORKER_STATUSES.filter((s) => s !== 'INACTIVE');

export async function workersPage(
  em: EntityManager,
  config: Pick<Config, 'workers'>,
  ctx: PageContext,
  params: Map<string, string>,
): Promise<string> {
  const status = params.get('status') ? oneOfParam(params.get('status')!, SHOWN_STATUSES, 'status') : null;
  const poolValue = params.get('pool') || null;
  const pool = poolValue && poolValue !== STATIC_POOL ? nameParam(poolValue, 'pool') : poolValue;
  const tag = params.get('tag') ? tagParam(params.get('tag')!) : null;
  const page = pageNumber(params);
  const principal = principalOf(ctx.viewer);
  const pools = (await listPools(em)).map((p) => p.name);
  if (pool && pool !== STATIC_POOL && !pools.includes(pool)) throw new StatusError(404, `There is no pool “${pool}”.`);

  const rows = await activeWorkerRows(em, config.workers.metadataFreshMs, {
    pool: pool === STATIC_POOL ? false : pool,
    providesTag: tag ? { tag, viewer: ctx.viewer } : null,
  });
  const counts = countByStatus(rows);
  const shown = status ? rows.filter((r) => r.status === status) : rows;
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  if (page > pages) throw new StatusError(404, `There is no page ${page}: the list has ${pages}.`);
  const link = (q: { status?: string | null; page?: number }) =>
    href(['workers'], {
      status: 'status' in q ? q.status : status,
      pool,
      tag,
      page: q.page && q.page > 1 ? q.page : null,
    });
  const now = new Date();

  const chips = [
    html`<li><a href="${link({ status: null })}"${status === null ? html` aria-current="true"` : ''}>All <strong>${rows.length}</strong></a></li>`,
    ...SHOWN_STATUSES.map(
      (s) =>
        html`<li><a href="${link({ status: s })}"${status === s ? html` aria-current="true"` : ''}>${STATUS_LABELS[s]} <strong>${counts.get(s) ?? 0}</strong></a></li>`,
    ),
  ];
  const option = (value: string, label: string, selected: boolean) =>
    html`<option value="${value}"${selected ? html` selected` : ''}>${label}</option>`;
  const filters = html`<form class="filters" method="get" action="/-/status/workers/">
<label>Status<select name="status">${option('', 'any', status === null)}${SHOWN_STATUSES.map((s) => option(s, STATUS_LABELS[s], status === s))}</select></label>
<label>Pool<select name="pool">${option('', 'any', pool === null)}${option(STATIC_POOL, 'static (no pool)', pool === STATIC_POOL)}${pools.map((p) => option(p, p, pool === p))}</select></label>
<label>Provides tag<input name="tag" value="${tag ?? ''}" placeholder="worker:build-arch:amd64" size="26"></label>
<button type="submit">Filter</button>${status || pool || tag ? html` <a href="/-/status/workers/">Clear</a>` : ''}</form>`;
  const tagNote =
    tag && !seesOtherWorkersDetails(principal)
      ? html`<p class="notice">Worker tags are shown to signed-in users: <a href="/-/status/login?next=${encodeURIComponent(ctx.here)}">sign in</a> to filter by tag.</p>`
      : '';
  const list = shown
    .slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE)
    .map((w) => [
      html`<a href="${href(['workers', w.name])}">${w.name}</a>`,
      w.type,
      w.pool ? html`<a href="${href(['pools', w.pool])}">${w.pool}</a>` : html`<span class="muted">static</span>`,
      badge(w.status, STATUS_LABELS[w.status]),
      ago(w.lastSeenAt, now),
    ]);
  const body = html`<h1>Workers</h1>
<ul class="chips" aria-label="Workers per status">${chips}</ul>
${filters}${tagNote}
${table(['Name', 'Type', 'Pool', 'Status', { label: 'Last seen', hideNarrow: true }], list, status || pool || tag ? 'No worker matches these filters.' : 'No workers yet.')}
${pager(page, pages, (p) => link({ page: p }))}
<p class="muted">${shown.length} worker${shown.length === 1 ? '' : 's'}${status || pool || tag ? ' match' : ''}. Pool workers whose instance is gone are kept as history and not listed.</p>`;
  return layout(ctx, { title: 'Workers', section: 'workers' }, body);
}
