import type { EntityManager } from '@mikro-orm/postgresql';
import { QUEUED_SQL } from '../../core/work-request-status.js';
import { FAIR_QUANTUM_MS } from '../rules/queue-order.js';

/**
 * Reserves `count` fair keys (rules/queue-order.ts) for new requests of one workspace and returns them
 * in submission order. One UPDATE of the workspace's clock; the row lock it takes is held until the
 * caller's transaction ends, so concurrent submissions to the same workspace get disjoint keys.
 */
export async function reserveFairKeys(
  em: EntityManager,
  workspaceId: number,
  count: number,
  now: Date,
): Promise<number[]> {
  return reserve(em, workspaceId, count, now, '');
}

/**
 * The clock's UPDATE. `from` may add a FROM item evaluated once with it (fairKeysFor's setting of
 * synchronous_commit for a reservation committed apart).
 */
async function reserve(
  em: EntityManager,
  workspaceId: number,
  count: number,
  now: Date,
  from: string,
): Promise<number[]> {
  if (count <= 0) return [];
  const [row] = await em.execute<{ first: string }[]>(
    `update workspace s
        set fair_clock = case when exists (select 1 from work_request r where r.workspace_id = s.id and r.status in (${QUEUED_SQL}))
                              then greatest(s.fair_clock, ?::bigint) else ?::bigint end + ?::bigint * ${FAIR_QUANTUM_MS}
       ${from}
      where s.id = ? returning (s.fair_clock - (?::bigint - 1) * ${FAIR_QUANTUM_MS})::text as first`,
    [now.getTime(), now.getTime(), count, workspaceId, count],
  );
  const first = row ? Number(row.first) : now.getTime();
  return Array.from({ length: count }, (_, i) => first + i * FAIR_QUANTUM_MS);
}

/**
 * Fair keys for rows of several workspaces, in the rows' order (one reservation per workspace).
 *
 * Outside a transaction (`em` not in one) each reservation is its own statement, committed at once:
 * concurrent creates into one workspace then wait for each other's clock row only for that statement,
 * not through each other's whole transaction. Its commit does not wait for its WAL to reach the disk
 * (synchronous_commit off for that statement alone): a create that uses the keys commits later, and
 * its own flush makes the reservation durable with it; one lost in a crash was used by nothing. The
 * caller checks its input first; a create that still fails after its keys were reserved (a race) leaves
 * a gap of one quantum per key in its workspace's clock: that workspace's next requests queue that much
 * later among equals, no one else's.
 * Inside a transaction the row lock is held until it ends, as reserveFairKeys says.
 */
export async function fairKeysFor(em: EntityManager, workspaceIds: readonly number[], now: Date): Promise<number[]> {
  const counts = new Map<number, number>();
  for (const ws of workspaceIds) counts.set(ws, (counts.get(ws) ?? 0) + 1);
  const apart = !em.isInTransaction();
  const keys = new Map<number, number[]>();
  for (const ws of [...counts.keys()].sort((a, b) => a - b)) {
    keys.set(
      ws,
      await reserve(
        em,
        ws,
        counts.get(ws)!,
        now,
        apart ? `from (select set_config('synchronous_commit', 'off', true)) as commit_setting` : '',
      ),
    );
  }
  const next = new Map<number, number>();
  return workspaceIds.map((ws) => {
    const i = next.get(ws) ?? 0;
    next.set(ws, i + 1);
    return keys.get(ws)![i];
  });
}
