/** The tables of work requests on the status pages; their rows, only those the viewer may see and the rest counted, are read by services/work/work-rows.ts. */
import type { WorkRow } from '../../services/work/work-rows.js';
import { between, duration, utc } from './format.js';
import { href, html, type Html } from './html.js';
import { badge, table } from './parts.js';

/** A link to a work request's page. */
export const workLink = (id: number, label: string | number = `#${id}`): Html =>
  html`<a href="${href(['work-requests', id])}">${label}</a>`;

/** A table of work requests: which columns depends on `kind`. */
export function workTable(rows: readonly WorkRow[], kind: 'running' | 'recent', now: Date, empty: string): Html {
  if (kind === 'running') {
    return table(
      ['Request', 'Task', 'Workspace', 'Status', 'Running for'],
      rows.map((r) => [
        workLink(r.id),
        r.taskName,
        r.workspace,
        badge(r.status),
        duration(between(r.startedAt ?? r.assignedAt, null, now)),
      ]),
      empty,
      { stack: true },
    );
  }
  return table(
    ['Request', 'Task', 'Workspace', 'Result', 'Duration', 'Finished'],
    rows.map((r) => [
      workLink(r.id),
      r.taskName,
      r.workspace,
      r.result ? badge(r.result) : badge(r.status),
      duration(between(r.startedAt, r.completedAt, now)),
      r.completedAt ? utc(r.completedAt) : '—',
    ]),
    empty,
    { stack: true },
  );
}

/** "and 3 more in workspaces you cannot see", or nothing. */
export const hiddenNote = (n: number): Html | string =>
  n ? html`<p class="muted">and ${n} more in workspaces you cannot see.</p>` : '';
