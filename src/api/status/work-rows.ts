/** Lists of work requests on the status pages: only those the viewer may see, the rest counted. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray, toDate } from '../../storage/db/arrays.js';
import { workRequestSql, type Principal } from '../../services/identity/visibility.js';
import { between, duration, utc } from './format.js';
import { href, html, type Html } from './html.js';
import { badge, table } from './parts.js';

export interface WorkRow {
  id: number;
  taskType: string;
  taskName: string;
  workspace: string;
  status: string;
  result: string | null;
  pendingAt: Date | null;
  assignedAt: Date | null;
  startedAt: Date | null;
  completedAt: Date | null;
  worker: string | null;
}

/** The columns of a WorkRow over `work_request wr` joined with its workspace `ws`, scope `s` and worker `wk`. */
export const WORK_ROW_SQL = `wr.id, wr.task_type, wr.task_name, s.name || '/' || ws.name as workspace, wr.status, wr.result,
  wr.pending_at, wr.assigned_at, wr.started_at, wr.completed_at, wk.name as worker`;
export const WORK_ROW_FROM = `work_request wr join workspace ws on ws.id = wr.workspace_id join scope s on s.id = ws.scope_id left join worker wk on wk.id = wr.worker_id`;

/** A row of WORK_ROW_SQL as a WorkRow. */
export function toWorkRow(r: Record<string, unknown>): WorkRow {
  return {
    id: r.id as number,
    taskType: r.task_type as string,
    taskName: r.task_name as string,
    workspace: r.workspace as string,
    status: r.status as string,
    result: (r.result as string | null) ?? null,
    pendingAt: toDate(r.pending_at as string | null),
    assignedAt: toDate(r.assigned_at as string | null),
    startedAt: toDate(r.started_at as string | null),
    completedAt: toDate(r.completed_at as string | null),
    worker: (r.worker as string | null) ?? null,
  };
}

/**
 * A worker's work in some statuses, newest first: up to `limit` requests the principal may see
 * (services/identity/visibility.ts), and how many others there are (counted, never described).
 */
export async function workerWork(
  em: EntityManager,
  principal: Principal,
  workerId: number,
  statuses: readonly string[],
  limit: number,
): Promise<{ rows: WorkRow[]; hidden: number }> {
  const vis = workRequestSql(principal, 'wr');
  const [rows, [hidden]] = await Promise.all([
    em.execute(
      `select ${WORK_ROW_SQL} from ${WORK_ROW_FROM}
        where wr.worker_id = ? and wr.status = any(?::text[]) and ${vis.sql}
        order by coalesce(wr.completed_at, wr.started_at, wr.assigned_at) desc nulls last, wr.id desc limit ?`,
      [workerId, textArray(statuses), ...vis.params, limit],
    ),
    em.execute<{ n: number }[]>(`select count(*)::int as n from work_request wr where wr.worker_id = ? and wr.status = any(?::text[]) and not (${vis.sql})`, [
      workerId,
      textArray(statuses),
      ...vis.params,
    ]),
  ]);
  return { rows: rows.map(toWorkRow), hidden: hidden.n };
}

/** A link to a work request's page. */
export const workLink = (id: number, label: string | number = `#${id}`): Html => html`<a href="${href(['work-requests', id])}">${label}</a>`;

/** A table of work requests: which columns depends on `kind`. */
export function workTable(rows: readonly WorkRow[], kind: 'running' | 'recent', now: Date, empty: string): Html {
  if (kind === 'running') {
    return table(
      ['Request', 'Task', 'Workspace', 'Status', 'Running for'],
      rows.map((r) => [workLink(r.id), r.taskName, r.workspace, badge(r.status), duration(between(r.startedAt ?? r.assignedAt, null, now))]),
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
export const hiddenNote = (n: number): Html | string => (n ? html`<p class="muted">and ${n} more in workspaces you cannot see.</p>` : '');
