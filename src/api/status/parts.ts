/** Pieces several status pages share: tables of tags, badges, pagers, a diagnosis in words. */
import type { Diagnosis, Mismatch, PlacementView, PoolOutlook } from '../../scheduler/matching/diagnosis.js';
import type { HeavyReason } from '../../scheduler/rules/heavy-work.js';
import type { PlacementRule } from '../../scheduler/rules/placement-preference.js';
import type { QueuePosition, QueueRule } from '../../scheduler/rules/queue-order.js';
import { duration, relative } from './format.js';
import type { TagEntry, TagRefusal } from '../../core/tags/types.js';
import { html, type Html } from './html.js';

/** A status, result or state as a coloured word. */
export const badge = (value: string, label: string = value): Html =>
  html`<span class="badge s-${value.replace(/[^A-Za-z_-]/g, '')}">${label}</span>`;

/** A column of a table: its heading, and whether a phone leaves it out. */
export type Column = string | { readonly label: string; readonly hideNarrow: true };

/**
 * A table of rows of cells (each cell escaped by `html` unless it is Html). On a phone a table
 * with `stack` shows each row as a block of "label value" lines (the labels come from the
 * columns); any other table scrolls sideways inside its frame rather than widening the page.
 */
export function table(
  columns: readonly Column[],
  rows: readonly (readonly unknown[])[],
  empty: string,
  options: { stack?: boolean } = {},
): Html {
  if (!rows.length) return html`<p class="muted">${empty}</p>`;
  const cols = columns.map((c) => (typeof c === 'string' ? { label: c, hideNarrow: false } : c));
  const cls = (i: number) => (cols[i]?.hideNarrow ? html` class="hide-narrow"` : '');
  return html`<div class="scroll"><table${options.stack ? html` class="stack"` : ''}><thead><tr>${cols.map((c, i) => html`<th${cls(i)}>${c.label}</th>`)}</tr></thead><tbody>${rows.map(
    (cells) =>
      html`<tr>${cells.map((cell, i) => html`<td data-label="${cols[i]?.label ?? ''}"${cls(i)}><div>${cell}</div></td>`)}</tr>`,
  )}</tbody></table></div>`;
}

/** Tags in a line, each kept whole where the line can break between them. */
export const tagList = (tags: readonly string[]): Html =>
  tags.length ? html`${tags.map((t) => html`<code class="tag">${t}</code> `)}` : html`<span class="muted">none</span>`;

/** Tags with their provenance and source. */
export function tagTable(entries: readonly TagEntry[]): Html {
  return table(
    ['Tag', 'Provenance', 'Source'],
    entries.map((e) => [html`<code>${e.tag}</code>`, e.provenance, e.source]),
    'none',
    { stack: true },
  );
}

/** Tags that were refused, with the reason. */
export function refusedTable(refused: readonly TagRefusal[]): Html {
  return table(
    ['Tag', 'Provenance', 'Source', 'Reason'],
    refused.map((r) => [html`<code>${r.tag}</code>`, r.provenance, r.source, r.message]),
    'none',
    { stack: true },
  );
}

/** Previous / next links around "page N of M". */
export function pager(page: number, pages: number, link: (page: number) => string): Html {
  if (pages <= 1) return html``;
  return html`<nav class="pager" aria-label="Pages">${page > 1 ? html`<a href="${link(page - 1)}" rel="prev">← Previous</a>` : ''}<span class="muted">Page ${page} of ${pages}</span>${
    page < pages ? html`<a href="${link(page + 1)}" rel="next">Next →</a>` : ''
  }</nav>`;
}

/** What a diagnosis state means, in words. */
export const DIAGNOSIS_WORDS: Record<Diagnosis['state'], string> = {
  NOT_PENDING: 'Not pending: nothing to wait for.',
  READY: 'A matching worker has a free slot: the next pass assigns it.',
  WAITING_FOR_BACKOFF:
    'The matching workers with a free slot released it recently: it is not offered to them again until the release backoff ends.',
  WAITING_FOR_CAPACITY: 'Matching workers are all busy: it waits for a free slot.',
  WAITING_FOR_WORKERS:
    'Matching workers exist, but none is available (disconnected, without a fresh metadata report, quarantined, draining or disabled).',
  WAITING_FOR_PROVISIONING: 'No worker matches, but a pool can start one.',
  WAITING_FOR_POOL_LIMIT:
    'No worker matches, and every pool that could run it is held by a limit: none may start one now.',
  ORCHESTRATED: 'Run by the server itself (an internal or workflow task): no worker will.',
  UNSCHEDULABLE: 'No worker and no pool could ever run it.',
};

/** What decided which free worker comes first, in words. */
export const PLACEMENT_RULE_WORDS: Record<PlacementRule, string> = {
  STATIC_BEFORE_POOL: 'static workers before pool workers',
  FASTEST_FOR_HEAVY: 'the fastest host first, for heavy work',
  LARGEST_FOR_HEAVY: 'the largest first, for heavy work',
  SMALLEST_FOR_LIGHT: 'the smallest that fits first',
  MOST_SPECIALISED: 'the most specialised first',
  OLDEST: 'the oldest registration first',
};

/** Why requests are ahead in the queue, in words. */
export const QUEUE_RULE_WORDS: Record<QueueRule, string> = {
  HIGHER_PRIORITY: 'higher priority',
  FAIR_SHARE: 'fair share (submitted later, but their workspace’s turn comes first)',
  AGE: 'age',
};

const HEAVY_WORDS: Record<HeavyReason, (p: PlacementView) => string> = {
  REQUIRES_LARGE: () => 'it requires worker:class:large',
  HISTORY: (p) =>
    `its task ran ${duration(p.averageSeconds)} on average over 30 days (heavy from ${duration(p.thresholdSeconds)})`,
};

/** A placement in one line: heavy or not and why, the preferred free workers, and the rule that chose the first. */
function placementLine(p: PlacementView): Html {
  const kind = p.heavyReason ? `Heavy work: ${HEAVY_WORDS[p.heavyReason](p)}.` : 'Not heavy work.';
  const workers = p.preferredWorkers.map(
    (n, i) => html`${i ? ', ' : ''}<a href="/-/status/workers/${encodeURIComponent(n)}/">${n}</a>`,
  );
  return html`${kind} ${p.preferredWorkers.length ? html`Free workers in order of preference: ${workers}${p.decidedBy ? ` (first by ${PLACEMENT_RULE_WORDS[p.decidedBy]})` : ''}.` : 'No free worker may take it now.'}`;
}

/** A queue position in one line: how many of its class are ahead, and why. */
function queueLine(q: QueuePosition): string {
  if (!q.ahead) return 'First of its class.';
  const parts = q.aheadBy.filter((a) => a.count).map((a) => `${a.count} by ${QUEUE_RULE_WORDS[a.rule]}`);
  return `${q.ahead} of its class ahead: ${parts.join(', ')}.`;
}

/** What keeps a pool from starting another worker, in words. */
const LAUNCH_LIMIT_WORDS: Record<PoolOutlook['atLimit'][number], (p: PoolOutlook) => string> = {
  MAX_ACTIVE_INSTANCES: (p) =>
    `at its limit of ${p.maxActiveInstances} instance${p.maxActiveInstances === 1 ? '' : 's'}`,
  MONTHLY_BUDGET: () => 'out of its monthly runtime budget',
  COST_BUDGET: () => 'out of its monthly cost budget',
  BACKOFF: () => 'waiting after failed launches',
  RATE_LIMIT: () => 'at its launch rate limit for this minute',
};

/** A matching pool: its link, what it is launching, and what holds it or that it could start a worker. */
function poolOutlookView(p: PoolOutlook, now: Date): Html {
  const launching = p.launching.map(
    (i, n) =>
      html`${n ? ', ' : ''}<a href="/-/status/workers/${encodeURIComponent(i.name)}/">${i.name}</a> for ${relative(i.since, now).replace(/ ago$/, '')}`,
  );
  const limits = p.atLimit.map((l) => LAUNCH_LIMIT_WORDS[l](p));
  const state = [...(launching.length ? [html`launching ${launching}`] : []), ...limits];
  return html`<a href="/-/status/pools/${encodeURIComponent(p.pool)}/">${p.pool}</a> (${state.length ? state.map((part, n) => html`${n ? '; ' : ''}${part}`) : 'could start a worker'})`;
}

/**
 * A diagnosis: its state and counts, the matching pools and the nearest mismatches. The tags of a
 * mismatch against a group of workers are those workers' details: where `showsTags` says the viewer
 * may not see them (services/identity/visibility.ts, canSeeWorkerGroupTags), only their counts are shown.
 */
export function diagnosisView(
  d: Diagnosis,
  showsTags: (m: Mismatch) => boolean,
  mismatchLimit = 5,
  now = new Date(),
): Html {
  const missing = (m: Mismatch, tags: readonly string[]) =>
    showsTags(m)
      ? tagList(tags)
      : html`<span class="muted">${tags.length} tag${tags.length === 1 ? '' : 's'} (shown to signed-in users)</span>`;
  const unavailable = d.unavailableWorkers
    .map((u) => `${u.count} ${u.reason.toLowerCase().replace(/_/g, ' ')}`)
    .join(', ');
  const mismatches = d.mismatches
    .slice(0, mismatchLimit)
    .map((m) => [
      m.pool
        ? html`pool <a href="/-/status/pools/${encodeURIComponent(m.pool)}/">${m.pool}</a>`
        : html`${m.workerCount} worker${m.workerCount === 1 ? '' : 's'}: ${m.workerNames.map((n, i) => html`${i ? ', ' : ''}<a href="/-/status/workers/${encodeURIComponent(n)}/">${n}</a>`)}${m.workerCount > m.workerNames.length ? ' …' : ''}`,
      missing(m, m.missingOnWorker),
      missing(m, m.missingOnTask),
    ]);
  return html`<p>${badge(d.state)} ${DIAGNOSIS_WORDS[d.state]}</p>
<dl class="facts"><dt>Matching workers</dt><dd>${d.matchingWorkers} (${d.availableWorkers} with a free slot, ${d.busyWorkers} busy${unavailable ? `, ${unavailable}` : ''})</dd>
<dt>Matching pools</dt><dd>${
    d.pools.length
      ? d.pools.map((p, i) => html`${i ? ', ' : ''}${poolOutlookView(p, now)}`)
      : d.matchingPools.length
        ? d.matchingPools.map(
            (p, i) => html`${i ? ', ' : ''}<a href="/-/status/pools/${encodeURIComponent(p)}/">${p}</a>`,
          )
        : 'none'
  }</dd>
${d.placement ? html`<dt>Placement</dt><dd>${placementLine(d.placement)}</dd>` : ''}
${d.queue ? html`<dt>In the queue</dt><dd>${queueLine(d.queue)}</dd>` : ''}</dl>
${d.mismatches.length && (d.state.startsWith('WAITING') || d.state === 'UNSCHEDULABLE') ? html`<h3>Nearest that cannot run it</h3><p class="muted">Missing on them: tags the request requires that they do not provide. Missing on the request: tags they require that it does not provide.</p>${table(['Workers or pool', 'Missing on them', 'Missing on the request'], mismatches, '', { stack: true })}${d.mismatches.length > mismatchLimit ? html`<p class="muted">and ${d.mismatches.length - mismatchLimit} more</p>` : ''}` : ''}`;
}
