import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Fair share between workspaces at equal priority (DESIGN §17), as a virtual clock: every request
 * gets a fair key when it is written, in milliseconds. A workspace's clock starts at the time of its
 * submission when it has nothing queued (no BLOCKED or PENDING request: what it submitted before and
 * was served leaves no debt), and each request it submits moves its clock on by one
 * quantum. The queue order at equal priority is by fair key, so a workspace that submitted a backlog
 * has keys far in the future, and a request another workspace submits later gets a key near now:
 * it is served interleaved with the backlog, not after it. Within one workspace keys grow with
 * submission, so its own requests keep their submission order.
 */
export const FAIR_QUANTUM_MS = 1000;

/**
 * The fair key a row gets when a writer did not set one: the clock of a workspace with nothing
 * queued (now, in milliseconds). Used as the column's default by the migration and the entity.
 */
export const FAIR_KEY_DEFAULT_SQL = `((extract(epoch from now()) * 1000)::bigint)`;

/**
 * A request's effective priority (base + adjustment) over a work_request alias: the first key of the
 * queue order, written as the queue indexes have it so that they serve every query that uses it.
 */
export const effectivePrioritySql = (w: string) => `${w}.priority_base + ${w}.priority_adjustment`;

/**
 * The queue order of DESIGN §6 with fair share, over a work_request alias: effective priority
 * descending, then fair key, then oldest, then id. Every queue query (pass, pull, placement) orders
 * by it, and the partial index `work_request_pending_class_order` has the same columns.
 */
export const queueOrderSql = (w: string) => `${effectivePrioritySql(w)} desc, ${w}.fair_key, ${w}.created_at, ${w}.id`;

/**
 * Whether the request `o` comes before the request `r` in {@link queueOrderSql}'s order (both
 * work_request aliases): a higher effective priority, or the same and then an earlier fair key, an
 * earlier creation, a lower id. queue-position.ts counts by it and names which of the columns decided.
 */
export const aheadInQueueSql = (o: string, r: string) =>
  `(${effectivePrioritySql(o)} > ${effectivePrioritySql(r)}
    or (${effectivePrioritySql(o)} = ${effectivePrioritySql(r)}
        and (${o}.fair_key, ${o}.created_at, ${o}.id) < (${r}.fair_key, ${r}.created_at, ${r}.id)))`;

/** The same order over queue heads already selected with their effective priority as `prio` (queue-sql.ts). */
export const headsOrderSql = (t: string) => `${t}.prio desc, ${t}.fair_key, ${t}.created_at, ${t}.id`;

/**
 * Reserves `count` fair keys for new requests of one workspace and returns them in submission order.
 * One UPDATE of the workspace's clock; the row lock it takes is held until the caller's transaction
 * ends, so concurrent submissions to the same workspace get disjoint keys.
 */
export async function reserveFairKeys(em: EntityManager, workspaceId: number, count: number, now: Date): Promise<number[]> {
  if (count <= 0) return [];
  const [row] = await em.execute<{ first: string }[]>(
    `update workspace s
        set fair_clock = case when exists (select 1 from work_request r where r.workspace_id = s.id and r.status in ('BLOCKED', 'PENDING'))
                              then greatest(s.fair_clock, ?::bigint) else ?::bigint end + ?::bigint * ${FAIR_QUANTUM_MS}
      where s.id = ? returning (s.fair_clock - (?::bigint - 1) * ${FAIR_QUANTUM_MS})::text as first`,
    [now.getTime(), now.getTime(), count, workspaceId, count],
  );
  const first = row ? Number(row.first) : now.getTime();
  return Array.from({ length: count }, (_, i) => first + i * FAIR_QUANTUM_MS);
}

/** Fair keys for rows of several workspaces, in the rows' order (one reservation per workspace). */
export async function fairKeysFor(em: EntityManager, workspaceIds: readonly number[], now: Date): Promise<number[]> {
  const counts = new Map<number, number>();
  for (const ws of workspaceIds) counts.set(ws, (counts.get(ws) ?? 0) + 1);
  const keys = new Map<number, number[]>();
  for (const ws of [...counts.keys()].sort((a, b) => a - b)) keys.set(ws, await reserveFairKeys(em, ws, counts.get(ws)!, now));
  const next = new Map<number, number>();
  return workspaceIds.map((ws) => {
    const i = next.get(ws) ?? 0;
    next.set(ws, i + 1);
    return keys.get(ws)![i];
  });
}
