/** Counts of the work requests in the queue and in flight, as the overview page and the metrics show them. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { PENDING_OR_ACTIVE_SQL, UNFINISHED_SQL } from '../../core/work-request-status.js';
import { toDate } from '../../storage/db/arrays.js';
import { isActiveSql } from '../../scheduler/rules/active-work.js';
import type { Viewer } from '../identity/auth.js';
import { principalOf, workRequestSql } from '../identity/visibility.js';

/** The queue in three numbers: pending, of which the viewer may see `visiblePending`, and assigned or running. */
export interface QueueCounts {
  readonly pending: number;
  readonly visiblePending: number;
  readonly running: number;
}

/** The pending and the active requests counted, the pending ones the viewer may see apart (one statement). */
export async function queueCounts(em: EntityManager, viewer: Viewer): Promise<QueueCounts> {
  const vis = workRequestSql(principalOf(viewer), 'wr');
  const [work] = await em.execute<{ pending: number; running: number; visible_pending: number }[]>(
    `select (count(*) filter (where status = 'PENDING'))::int as pending, (count(*) filter (where ${isActiveSql('wr')}))::int as running,
            (count(*) filter (where status = 'PENDING' and ${vis.sql}))::int as visible_pending
       from work_request wr where status in (${PENDING_OR_ACTIVE_SQL})`,
    [...vis.params],
  );
  return { pending: work.pending, visiblePending: work.visible_pending, running: work.running };
}

/**
 * The unfinished requests (BLOCKED, PENDING, ASSIGNED, RUNNING) per workspace id and status, the
 * groups that have any (one statement: an index-only scan of work_request_unfinished_workspace).
 */
export function unfinishedByWorkspace(
  em: EntityManager,
): Promise<{ workspace_id: number; status: string; n: number }[]> {
  return em.execute<{ workspace_id: number; status: string; n: number }[]>(
    `select workspace_id, status, count(*)::int as n from work_request
      where status in (${UNFINISHED_SQL}) group by workspace_id, status`,
  );
}

/** When the request pending longest last became PENDING; null with none pending (one statement). */
export async function oldestPendingSince(em: EntityManager): Promise<Date | null> {
  const [oldest] = await em.execute<{ since: Date | string | null }[]>(
    `select min(pending_at) as since from work_request where status = 'PENDING'`,
  );
  return toDate(oldest?.since);
}
