/**
 * When a pool's worker retires (docs/design.md: pools and instances), in its one home. A retiring
 * worker takes no new work (it is draining), and the provisioner stops it as soon as it holds none,
 * without waiting for the idle timeout; demand then launches a replacement if the work asks for one.
 * A pool retires its workers
 * - after `maxWorkRequestsPerInstance` assignments (1: a fresh machine for each request). Counted by
 *   PostgreSQL as requests are assigned, in the assigning statement's transaction (the triggers
 *   `worker_assignment_count_*`, whose functions are {@link assignmentCountFunctionsSql}, as a
 *   migration wrote them into the database): the worker drains in the same transaction
 *   as its last allowed assignment, so no later statement can give it one more. A statement that
 *   assigns several requests to one worker at once (a pass filling a worker's free slots) counts them
 *   all, so a worker with a concurrency above its limit may get up to its concurrency in that statement;
 *   the pool's docs say to keep concurrency at most the limit.
 * - after `maxInstanceLifetimeSeconds` from its instance's creation (the provisioner's cycle marks it).
 * - when it is outdated: its instance was launched from other specifications (an image, a size, a
 *   handler) than the pool has now ({@link templateFingerprint} differs). Only idle outdated workers
 *   retire, and at most `maxReplacingInstances` of a pool at a time, counting those retiring and the
 *   replacements still launching ({@link replacementRoom}): a rollout never takes more capacity than that away.
 * The TypeScript and the SQL of each rule are pinned together by test/provisioner/retirement-cycle.test.ts,
 * which also checks that the trigger functions the migrations leave in the database are the ones
 * written here: a change of the request limit here needs a migration that installs it.
 */
import { createHash } from 'node:crypto';
import { isActiveSql } from './active-work.js';

/** Why a pool worker retires; null while it does not. */
export const RETIRING_REASONS = {
  /** It has run the most requests its pool gives an instance. */
  WORK_REQUESTS: 'WORK_REQUESTS',
  /** Its instance is older than its pool's maximum lifetime. */
  LIFETIME: 'LIFETIME',
  /** Its instance was launched from other specifications than its pool has now (an image rollout). */
  OUTDATED: 'OUTDATED',
} as const;
export type RetiringReason = (typeof RETIRING_REASONS)[keyof typeof RETIRING_REASONS];

/**
 * Whether a retiring worker (`reason` not null) is to be stopped now: it holds no work (it gets none,
 * it is draining). Not an idle timeout, a minimum kept idle nor work waiting for its pool holds it:
 * demand lists it in its pool's `stopWorkers` (matching/demand-plan.ts), and the server stops it (its
 * worker terminated, its instance STOPPING: loops/provisioner/retire.ts) with the provisioner on or off.
 */
export function retiredToStop(reason: RetiringReason | null | undefined, activeWork: number): boolean {
  return reason != null && activeWork === 0;
}

/** {@link retiredToStop} in SQL, on the worker table under `w`. */
export const retiredToStopSql = (w: string) =>
  `(${w}.retiring_reason is not null and not exists (select 1 from work_request a where a.worker_id = ${w}.id and ${isActiveSql('a')}))`;

/** Whether a worker that has been assigned `assigned` requests has reached its pool's limit (null: none). */
export function reachedWorkRequestLimit(assigned: number, limit: number | null): boolean {
  return limit != null && assigned >= limit;
}

/** {@link reachedWorkRequestLimit} in SQL, over SQL expressions for the count and the limit. */
export const reachedWorkRequestLimitSql = (assigned: string, limit: string) =>
  `(${limit} is not null and ${assigned} >= ${limit})`;

/**
 * The request limit as PostgreSQL applies it: the functions of the statement triggers on work_request
 * (after insert and after update, over their transition tables `new_rows` and `old_rows`), which count
 * the requests newly ASSIGNED to each worker of a pool with a limit, in one UPDATE of the workers per
 * statement, and drain a worker that {@link reachedWorkRequestLimitSql reached it} with the reason
 * WORK_REQUESTS in the same transaction. Workers of pools without a limit are neither counted nor written.
 * A request newly ASSIGNED is one inserted as ASSIGNED, or updated to ASSIGNED or to another worker.
 */
export function assignmentCountFunctionsSql(): { name: string; sql: string }[] {
  const reached = reachedWorkRequestLimitSql('w."assigned_total" + c.n', 'p."max_work_requests_per_instance"');
  const body = (newlyAssigned: string) => `
      begin
        with counted as (${newlyAssigned})
        update "worker" w
           set "assigned_total" = w."assigned_total" + c.n,
               "draining" = w."draining" or ${reached},
               "retiring_reason" = coalesce(w."retiring_reason", case when ${reached} then '${RETIRING_REASONS.WORK_REQUESTS}' end)
          from counted c, "worker_pool" p
         where w."id" = c."worker_id" and p."id" = w."pool_id" and p."max_work_requests_per_instance" is not null;
        return null;
      end`;
  const fn = (name: string, newlyAssigned: string) => ({
    name,
    sql: `create or replace function "${name}"() returns trigger language plpgsql as $$${body(newlyAssigned)}$$;`,
  });
  return [
    fn(
      'worker_assignment_count_update',
      `select n."worker_id", count(*)::int as n from "new_rows" n join "old_rows" o on o."id" = n."id"
        where n."status" = 'ASSIGNED' and n."worker_id" is not null and (o."status" <> 'ASSIGNED' or o."worker_id" is distinct from n."worker_id")
        group by n."worker_id"`,
    ),
    fn(
      'worker_assignment_count_insert',
      `select n."worker_id", count(*)::int as n from "new_rows" n where n."status" = 'ASSIGNED' and n."worker_id" is not null group by n."worker_id"`,
    ),
  ];
}

/** Whether an instance created at `createdAt` has outlived its pool's maximum lifetime (null: none). */
export function outlived(createdAt: Date | null, lifetimeSeconds: number | null, now: Date): boolean {
  return createdAt != null && lifetimeSeconds != null && now.getTime() - createdAt.getTime() >= lifetimeSeconds * 1000;
}

/** {@link outlived} in SQL, over SQL expressions for the creation time, the lifetime, and now (a timestamptz parameter). */
export const outlivedSql = (createdAt: string, lifetimeSeconds: string, now: string) =>
  `(${createdAt} is not null and ${lifetimeSeconds} is not null and ${now} - ${createdAt} >= make_interval(secs => ${lifetimeSeconds}))`;

/** JSON with its object keys sorted, so that equal specifications give equal text. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined && v !== null);
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Specifications as they make a machine: an offering's `pricePerHour` is for cost only (pool-cost.ts), so it is left out. */
function madeFrom(specifications: unknown): unknown {
  if (!specifications || typeof specifications !== 'object') return specifications;
  const { offerings } = specifications as { offerings?: unknown };
  if (!Array.isArray(offerings)) return specifications;
  return {
    ...specifications,
    offerings: offerings.map((o: unknown) => (o && typeof o === 'object' ? { ...o, pricePerHour: undefined } : o)),
  };
}

/**
 * What an instance is made from, as a short hash: its pool's provider type and specifications (the
 * image, the size, the handlers...), but for the offerings' prices. Kept on each instance at its launch;
 * an instance whose fingerprint differs from its pool's is outdated. Unset fields count as absent.
 */
export function templateFingerprint(pool: { providerType: string; specifications: unknown }): string {
  return createHash('sha256')
    .update(`${pool.providerType}\n${stableJson(madeFrom(pool.specifications ?? {}))}`)
    .digest('hex')
    .slice(0, 32);
}

/**
 * Whether an instance that kept `instanceFingerprint` at its launch is outdated for `pool` now: made from
 * other specifications than the pool's; null when it kept none (launched before fingerprints were kept).
 * Which states count (live ones, RUNNING ones to retire) is the caller's.
 */
export function isOutdated(
  instanceFingerprint: string | null | undefined,
  pool: { providerType: string; specifications: unknown },
): boolean | null {
  return instanceFingerprint ? instanceFingerprint !== templateFingerprint(pool) : null;
}

/**
 * {@link isOutdated} in SQL (false where it is null), over an instance's `template_fingerprint` column;
 * its one parameter is the pool's {@link templateFingerprint}.
 */
export const outdatedSql = (fingerprintColumn: string) =>
  `(${fingerprintColumn} is not null and ${fingerprintColumn} <> ?)`;

/** How many more outdated instances a pool may retire now: its maximum at a time, less those retiring for it and the replacements still launching. */
export function replacementRoom(maxReplacing: number, retiringOutdated: number, launching: number): number {
  return Math.max(0, maxReplacing - retiringOutdated - launching);
}

/** What a retiring worker's reason says, in words, for logs, the CLI and the pages. */
export function retiringText(
  reason: RetiringReason,
  pool: { name: string; maxWorkRequestsPerInstance: number | null; maxInstanceLifetimeSeconds: number | null },
): string {
  if (reason === RETIRING_REASONS.WORK_REQUESTS)
    return `it ran the ${pool.maxWorkRequestsPerInstance} work request${pool.maxWorkRequestsPerInstance === 1 ? '' : 's'} pool ${pool.name} gives an instance`;
  if (reason === RETIRING_REASONS.LIFETIME)
    return `its instance is older than the ${pool.maxInstanceLifetimeSeconds} s lifetime of pool ${pool.name}`;
  return `its instance was made from older specifications than pool ${pool.name} has now`;
}
