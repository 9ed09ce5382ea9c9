/**
 * Work requests as the status pages list them: a row of each with its workspace's and worker's names,
 * only the requests the viewer may see (services/identity/visibility.ts), the others counted.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, textArray, toDate } from '../../storage/db/arrays.js';
import type { Viewer } from '../identity/auth.js';
import { principalOf, workRequestSql } from '../identity/visibility.js';

/** A work request in a list of the status pages. */
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
const WORK_ROW_SQL = `wr.id, wr.task_type, wr.task_name, s.name || '/' || ws.name as workspace, wr.status, wr.result,
  wr.pending_at, wr.assigned_at, wr.started_at, wr.completed_at, wk.name as worker`;
const WORK_ROW_FROM = `work_request wr join workspace ws on ws.id = wr.workspace_id join scope s on s.id = ws.scope_id left join worker wk on wk.id = wr.worker_id`;

/** A row of WORK_ROW_SQL as a WorkRow. */
function toWorkRow(r: Record<string, unknown>): WorkRow {
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
 * A worker's work in some statuses, newest first: up to `limit` requests the viewer may see, and how
 * many others there are (counted, never described); two statements.
 */
export async function workerWork(
  em: EntityManager,
  viewer: Viewer,
  workerId: number,
  statuses: readonly string[],
  limit: number,
): Promise<{ rows: WorkRow[]; hidden: number }> {
  const vis = workRequestSql(principalOf(viewer), 'wr');
  const [rows, [hidden]] = await Promise.all([
    em.execute(
      `select ${WORK_ROW_SQL} from ${WORK_ROW_FROM}
        where wr.worker_id = ? and wr.status = any(?::text[]) and ${vis.sql}
        order by coalesce(wr.completed_at, wr.started_at, wr.assigned_at) desc nulls last, wr.id desc limit ?`,
      [workerId, textArray(statuses), ...vis.params, limit],
    ),
    em.execute<{ n: number }[]>(
      `select count(*)::int as n from work_request wr where wr.worker_id = ? and wr.status = any(?::text[]) and not (${vis.sql})`,
      [workerId, textArray(statuses), ...vis.params],
    ),
  ]);
  return { rows: rows.map(toWorkRow), hidden: hidden.n };
}

/** The pending work of one task class (`classId` null: requests not classified yet), as the queue page counts it. */
export interface PendingClass {
  readonly classId: number | null;
  /** Its pending requests, all of them. */
  readonly n: number;
  /** Those the viewer may see. */
  readonly visible: number;
  /** When the oldest the viewer may see became PENDING; null when it sees none. */
  readonly oldest: Date | null;
}

/** The pending requests per task class, with those the viewer may see counted apart (one statement). */
export async function pendingClasses(em: EntityManager, viewer: Viewer): Promise<PendingClass[]> {
  const vis = workRequestSql(principalOf(viewer), 'wr');
  const rows = await em.execute<
    { class_id: number | null; n: number; visible: number; oldest: Date | string | null }[]
  >(
    `select wr.class_id, count(*)::int as n, (count(*) filter (where ${vis.sql}))::int as visible, min(wr.pending_at) filter (where ${vis.sql}) as oldest
       from work_request wr where wr.status = 'PENDING' group by wr.class_id`,
    [...vis.params, ...vis.params],
  );
  return rows.map((r) => ({ classId: r.class_id, n: r.n, visible: r.visible, oldest: toDate(r.oldest) }));
}

/**
 * The pending requests the viewer may see of these classes (0 for requests not classified yet), oldest
 * first: of each class those after its `from` first and up to its `to`th, with their class (one statement).
 */
export async function pendingOfClasses(
  em: EntityManager,
  viewer: Viewer,
  classIds: readonly number[],
  range: { from: number; to: number },
): Promise<(WorkRow & { classId: number })[]> {
  const vis = workRequestSql(principalOf(viewer), 'wr');
  const rows = await em.execute(
    `select * from (
       select ${WORK_ROW_SQL}, wr.class_id, row_number() over (partition by wr.class_id order by wr.pending_at, wr.id) as k
         from ${WORK_ROW_FROM}
        where wr.status = 'PENDING' and coalesce(wr.class_id, 0) = any(?::int[]) and ${vis.sql}) x
      where k > ? and k <= ? order by pending_at, id`,
    [intArray(classIds), ...vis.params, range.from, range.to],
  );
  return rows.map((r) => ({ ...toWorkRow(r), classId: (r.class_id as number | null) ?? 0 }));
}
