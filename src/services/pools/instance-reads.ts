/** The reads of pools' instances that the API and the status pages show: pages of them, and counts by state. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { LIVE_INSTANCE_SQL } from '../../core/instance-state.js';
import { intArray, textArray, toDate } from '../../storage/db/arrays.js';
import { InstanceSchema, type Instance } from '../../storage/entities/instance.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import { outdatedSql, templateFingerprint, type RetiringReason } from '../../scheduler/rules/instance-retirement.js';

/**
 * Each pool's instances, newest first: `size` of them at most, in `states` when given, older than the
 * instance `olderThan` when given; by pool id, in two statements for all the pools of a list.
 */
export async function instancePages(
  em: EntityManager,
  poolIds: readonly number[],
  page: { states: readonly string[] | null; size: number; olderThan: number | null },
): Promise<Map<number, Instance[]>> {
  const rows = await em.execute<{ id: number }[]>(
    `select id from (
       select i.id, row_number() over (partition by i.pool_id order by i.id desc) as n
         from instance i
        where i.pool_id = any(?::int[]) and (?::text[] is null or i.state = any(?::text[])) and (?::int is null or i.id < ?::int)
     ) x where n <= ?`,
    [
      intArray(poolIds),
      page.states && textArray(page.states),
      page.states && textArray(page.states),
      page.olderThan,
      page.olderThan,
      page.size,
    ],
  );
  const found = rows.length
    ? await em.find(InstanceSchema, { id: { $in: rows.map((r) => r.id) } }, { orderBy: { id: 'desc' } })
    : [];
  return new Map(poolIds.map((id) => [id, found.filter((i) => i.pool.id === id)]));
}

/** How many instances each pool has in each state, by pool id then state (one statement). */
export async function instanceCountsByPool(em: EntityManager): Promise<Map<number, Map<string, number>>> {
  const rows = await em.execute<{ pool_id: number; state: string; n: number }[]>(
    `select pool_id, state, count(*)::int as n from instance group by pool_id, state`,
  );
  const byPool = new Map<number, Map<string, number>>();
  for (const r of rows) {
    if (!byPool.has(r.pool_id)) byPool.set(r.pool_id, new Map());
    byPool.get(r.pool_id)!.set(r.state, r.n);
  }
  return byPool;
}

/** The live instances (LAUNCHING, RUNNING, STOPPING) per pool name and state, with a row of a null state for a pool without any (one statement). */
export function liveInstancesByPool(em: EntityManager): Promise<{ pool: string; state: string | null; n: number }[]> {
  return em.execute<{ pool: string; state: string | null; n: number }[]>(
    `select p.name as pool, i.state, count(i.id)::int as n
       from worker_pool p left join instance i on i.pool_id = p.id and i.state in (${LIVE_INSTANCE_SQL})
      group by p.name, i.state`,
  );
}

/** Whether the pool has an instance of this name (one statement). */
export async function poolHasInstance(em: EntityManager, poolId: number, name: string): Promise<boolean> {
  const [row] = await em.execute<{ n: number }[]>(
    `select count(*)::int as n from instance where pool_id = ? and name = ?`,
    [poolId, name],
  );
  return row.n > 0;
}

/** How many instances the pool has had, in any state (one statement). */
export async function poolInstanceCount(em: EntityManager, poolId: number): Promise<number> {
  const [row] = await em.execute<{ n: number }[]>(`select count(*)::int as n from instance where pool_id = ?`, [
    poolId,
  ]);
  return row.n;
}

/** An instance of a pool's page, with what its worker says of it. */
export interface PoolInstanceRow {
  readonly name: string;
  readonly state: string;
  readonly providerId: string | null;
  readonly error: string | null;
  readonly requestedAt: Date;
  readonly startedAt: Date | null;
  readonly terminatedAt: Date | null;
  /** Its worker's name; null once that worker is deleted. */
  readonly worker: string | null;
  /** Whether its worker is not terminated (true without a worker). */
  readonly workerActive: boolean;
  readonly retiringReason: RetiringReason | null;
  readonly assignedTotal: number | null;
  readonly templateFingerprint: string | null;
  /** The price per hour recorded at its launch; null when none was. */
  readonly pricePerHour: number | null;
}

/** A page of a pool's instances, newest first: `limit` from `offset` (one statement). */
export async function poolInstanceRows(
  em: EntityManager,
  poolId: number,
  page: { limit: number; offset: number },
): Promise<PoolInstanceRow[]> {
  const rows = await em.execute<Record<string, unknown>[]>(
    `select i.name, i.state, i.provider_id, i.error, i.requested_at, i.started_at, i.terminated_at, w.name as worker, w.terminated_at is null as worker_active,
            w.retiring_reason, w.assigned_total, i.template_fingerprint, i.price_per_hour
       from instance i left join worker w on w.id = i.worker_id
      where i.pool_id = ? order by i.id desc limit ? offset ?`,
    [poolId, page.limit, page.offset],
  );
  return rows.map((i) => ({
    name: i.name as string,
    state: String(i.state),
    providerId: (i.provider_id as string | null) ?? null,
    error: (i.error as string | null) ?? null,
    requestedAt: toDate(i.requested_at as string)!,
    startedAt: toDate(i.started_at as string | null),
    terminatedAt: toDate(i.terminated_at as string | null),
    worker: (i.worker as string | null) ?? null,
    workerActive: Boolean(i.worker_active),
    retiringReason: (i.retiring_reason as RetiringReason | null) ?? null,
    assignedTotal: i.assigned_total == null ? null : Number(i.assigned_total),
    templateFingerprint: (i.template_fingerprint as string | null) ?? null,
    pricePerHour: i.price_per_hour == null ? null : Number(i.price_per_hour),
  }));
}

/** A pool's live instances by the specifications they were launched from: the current ones, older ones, and unknown (launched before this was recorded). */
export interface RolloutCounts {
  readonly outdated: number;
  readonly current: number;
  readonly unknown: number;
}

/** The pool's live instances counted by {@link RolloutCounts} (one statement; scheduler/rules/instance-retirement.ts). */
export async function rolloutCounts(
  em: EntityManager,
  pool: Pick<WorkerPool, 'id' | 'providerType' | 'specifications'>,
): Promise<RolloutCounts> {
  const [c] = await em.execute<{ outdated: number; current: number; unknown: number }[]>(
    `select count(*) filter (where ${outdatedSql('template_fingerprint')})::int as outdated, count(*) filter (where template_fingerprint = ?)::int as current,
            count(*) filter (where template_fingerprint is null)::int as unknown
       from instance where pool_id = ? and state in (${LIVE_INSTANCE_SQL})`,
    [templateFingerprint(pool), templateFingerprint(pool), pool.id],
  );
  return c;
}
