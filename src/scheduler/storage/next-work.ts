import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../config.js';
import { intArray, toDate } from '../../db/arrays.js';
import { executeInOneTrip, type TripStatement } from '../../db/one-trip.js';
import { activeWorkSql, freeSlots } from '../rules/active-work.js';
import { availableParams, availableSql } from '../rules/availability.js';
import type { ClassCache } from '../matching/class-cache.js';
import type { Assignment } from './assign.js';
import { ASSIGN_FIRST_SQL } from './queue-heads.js';
import { notBackedOffParams } from '../rules/release-backoff.js';

const HEADS_PER_CLASS = 4; // candidates per class; more only if others keep taking them first
const ATTEMPTS = 4;

/** A worker's call to record in the pull's trip: a SET list over its row and the list's parameters (services/workers/presence.ts seenByCall). */
export interface CallSeen {
  readonly set: string;
  readonly params: readonly unknown[];
}

/** An assignment by assignNextWork, with every column of the request as the assignment left it. */
export type NextAssignment = Assignment & { readonly row: Record<string, unknown> };

/**
 * Atomically assigns the next work request a worker may run, or returns null. The worker row is
 * locked, so one worker's concurrent calls never exceed its concurrency; candidate rows are taken
 * with SKIP LOCKED, so concurrent workers never get the same request and never wait on each other.
 * With `skipLocked` a worker locked by another transaction is passed over (null) instead of waited
 * for. With `seen`, the worker's call is recorded first, in the same trip as the lock. Runs inside the
 * caller's transaction.
 */
export async function assignNextWork(
  em: EntityManager,
  cache: ClassCache,
  config: Config,
  workerId: number,
  now: Date,
  options: { skipLocked?: boolean; seen?: CallSeen } = {},
): Promise<NextAssignment | null> {
  // The worker, locked, and the newest class id (to refresh the cache only when behind); then its load,
  // in a statement of its own: one that started before the lock was granted would still see the
  // snapshot from before a concurrent call of the same worker committed its assignment. Both in one
  // trip: the second statement takes its snapshot after the first has its lock. The call's record, when
  // given, goes first: its UPDATE takes the same row lock.
  type Locked = { id: number; type: string; available: boolean; concurrency: number; provided_tags: string[]; required_tags: string[]; latest_class: number };
  const seen: TripStatement[] = options.seen ? [{ sql: `update worker set ${options.seen.set} where id = ?`, params: [...options.seen.params, workerId] }] : [];
  const results = await executeInOneTrip<unknown[][]>(em, [
    ...seen,
    {
      sql: `select w.id, w.type, ${availableSql('w')} as available, w.concurrency, w.provided_tags, w.required_tags,
            (select coalesce(max(id), 0) from task_class) as latest_class
       from worker w where w.id = ? for update of w${options.skipLocked ? ' skip locked' : ''}`,
      params: [...availableParams(now, config.metadataFreshMs), workerId],
    },
    { sql: `select ${activeWorkSql('?')} as active`, params: [workerId] },
  ]);
  const [[w], [{ active }]] = results.slice(seen.length) as [Locked[], { active: number }[]];
  if (!w) return null; // no such worker, or (skipLocked) busy in another transaction
  if (!w.available) return null;
  if (freeSlots(w.concurrency, active) === 0) return null;

  await cache.refreshIfBehind(em, w.latest_class);
  const eligible = cache.eligibleFor({ type: w.type, providedTags: w.provided_tags, requiredTags: w.required_tags });
  if (!eligible.length) return null;
  let perClass = HEADS_PER_CLASS;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const [{ heads_: heads, ...row }] = await em.execute<({ heads_: number } & Record<string, unknown>)[]>(ASSIGN_FIRST_SQL, [
      intArray(eligible),
      perClass,
      perClass,
      ...notBackedOffParams(workerId, now),
      now,
      workerId,
    ]);
    if (row.id !== null) {
      return { workRequestId: row.id as number, workerId, workspaceId: row.workspace_id as number, pendingAt: toDate(row.pending_at as Date | string | null), row };
    }
    if (heads === 0) return null; // nothing this worker may run
    perClass *= 4; // every head was taken or locked by a concurrent caller: look deeper
  }
  return null;
}
