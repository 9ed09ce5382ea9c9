/**
 * The reads of work requests as a viewer sees them (services/identity/visibility.ts): the lists and
 * relations the API answers, each in one statement for all the parents of a list, and the status pages
 * where they ask the same question (a request's dependencies).
 */
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../storage/db/arrays.js';
import { asFilter } from '../../storage/db/condition.js';
import { ACTIVE_STATUSES, type WorkRequestStatus } from '../../core/work-request-status.js';
import { WorkRequestSchema, type WorkRequest } from '../../storage/entities/work-request.js';
import { loadTaskTags, type TaskTagsRow } from '../../scheduler/matching/candidates.js';
import type { Viewer } from '../identity/auth.js';
import { principalOf, workRequestSql } from '../identity/visibility.js';

/** A request's dependencies: those the viewer may see by id (in id order), the others counted. */
export interface Dependencies {
  readonly visible: number[];
  readonly hidden: number;
}

/** The dependencies of each request, in the order of `ids` (one statement). */
export async function dependenciesOf(
  em: EntityManager,
  viewer: Viewer,
  ids: readonly number[],
): Promise<Dependencies[]> {
  const visible = workRequestSql(principalOf(viewer), 'dep');
  const rows = await em.execute<{ work_request_id: number; depends_on_id: number; visible: boolean }[]>(
    `select d.work_request_id, d.depends_on_id, ${visible.sql} as visible
       from work_request_dependency d join work_request dep on dep.id = d.depends_on_id
      where d.work_request_id = any(?::int[]) order by d.depends_on_id`,
    [...visible.params, intArray(ids)],
  );
  return ids.map((id) => {
    const mine = rows.filter((r) => r.work_request_id === id);
    return {
      visible: mine.filter((r) => r.visible).map((r) => r.depends_on_id),
      hidden: mine.filter((r) => !r.visible).length,
    };
  });
}

/** The requests of these ids the viewer may see, by id (one statement). */
export async function visibleWorkRequests(
  em: EntityManager,
  viewer: Viewer,
  ids: readonly number[],
): Promise<Map<number, WorkRequest>> {
  const principal = principalOf(viewer);
  const and: FilterQuery<WorkRequest>[] = [
    { id: { $in: [...ids] } },
    asFilter((alias) => workRequestSql(principal, alias)),
  ];
  const rows = await em.find(WorkRequestSchema, { $and: and });
  return new Map(rows.map((r) => [r.id, r]));
}

/** The tags of the requests of these ids the viewer may see, for their candidates (one statement; scheduler/matching/candidates.ts). */
export function visibleTaskTags(em: EntityManager, viewer: Viewer, ids: readonly number[]): Promise<TaskTagsRow[]> {
  return loadTaskTags(em, ids, workRequestSql(principalOf(viewer), 'wr'));
}

/** The last quarantine probe of each worker, by worker id, when the viewer may see it (two statements). */
export async function lastQuarantineProbes(
  em: EntityManager,
  viewer: Viewer,
  workerIds: readonly number[],
): Promise<Map<number, WorkRequest>> {
  const last = await em.execute<{ worker_id: number; id: number }[]>(
    `select distinct on (worker_id) worker_id, id from work_request where quarantine_probe and worker_id = any(?::int[]) order by worker_id, id desc`,
    [intArray(workerIds)],
  );
  const found = last.length
    ? await visibleWorkRequests(
        em,
        viewer,
        last.map((r) => r.id),
      )
    : new Map<number, WorkRequest>();
  const out = new Map<number, WorkRequest>();
  for (const r of last) {
    const wr = found.get(r.id);
    if (wr) out.set(r.worker_id, wr);
  }
  return out;
}

/**
 * The children of each workflow that the viewer may see, in creation order, after the child `after`
 * (0: from the first), `size` of them at most per workflow, by workflow id (two statements for all).
 */
export async function childrenOf(
  em: EntityManager,
  viewer: Viewer,
  parentIds: readonly number[],
  page: { after: number; size: number },
): Promise<Map<number, WorkRequest[]>> {
  const visible = workRequestSql(principalOf(viewer), 'c');
  const rows = await em.execute<{ id: number; parent_id: number }[]>(
    `select id, parent_id from (
       select c.id, c.parent_id, row_number() over (partition by c.parent_id order by c.id) as n
         from work_request c where c.parent_id = any(?::int[]) and c.id > ? and ${visible.sql}
     ) page where n <= ? order by id`,
    [intArray(parentIds), page.after, ...visible.params, page.size],
  );
  const found = rows.length
    ? await visibleWorkRequests(
        em,
        viewer,
        rows.map((r) => r.id),
      )
    : new Map<number, WorkRequest>();
  return new Map(parentIds.map((id) => [id, rows.filter((r) => r.parent_id === id).map((r) => found.get(r.id)!)]));
}

/** Which work requests a list holds; every field given must hold. */
export interface WorkRequestListFilter {
  readonly status?: readonly WorkRequestStatus[] | null;
  /** The workspace, its scope and name already split (services/input/validate.ts: splitWorkspaceName). */
  readonly workspace?: { readonly scope: string; readonly name: string } | null;
  readonly taskName?: string | null;
  /** An exact tag of the frozen required set. */
  readonly requiresTag?: string | null;
  /** An exact tag of the frozen provided set. */
  readonly providesTag?: string | null;
  /** The name of the worker they are assigned to. */
  readonly worker?: string | null;
}

/**
 * Requests holding a tag, written as two arms so that each has an index: the partial GIN index of the
 * tag side for requests not ASSIGNED or RUNNING (TAG_INDEXED_SQL), and the few active ones apart.
 */
function tagFilter(field: 'requiredTags' | 'providedTags', tag: string): FilterQuery<WorkRequest> {
  return {
    $or: [
      { status: { $nin: [...ACTIVE_STATUSES] }, [field]: { $contains: [tag] } },
      { status: { $in: [...ACTIVE_STATUSES] }, [field]: { $contains: [tag] } },
    ],
  };
}

/** The work requests the viewer may see that the filter keeps, newest first, older than the request `before` when given; `limit` at most (one statement). */
export function listWorkRequests(
  em: EntityManager,
  viewer: Viewer,
  filter: WorkRequestListFilter | null | undefined,
  page: { before: number | null; limit: number },
): Promise<WorkRequest[]> {
  const f = filter;
  const principal = principalOf(viewer);
  const and: FilterQuery<WorkRequest>[] = [asFilter((alias) => workRequestSql(principal, alias))];
  if (f?.status?.length) and.push({ status: { $in: [...f.status] } });
  if (f?.workspace) and.push({ workspace: { name: f.workspace.name, scope: { name: f.workspace.scope } } });
  if (f?.taskName) and.push({ taskName: f.taskName });
  if (f?.requiresTag) and.push(tagFilter('requiredTags', f.requiresTag));
  if (f?.providesTag) and.push(tagFilter('providedTags', f.providesTag));
  if (f?.worker) and.push({ worker: { name: f.worker } });
  if (page.before !== null) and.push({ id: { $lt: page.before } });
  return em.find(WorkRequestSchema, { $and: and }, { orderBy: { id: 'desc' }, limit: page.limit });
}
