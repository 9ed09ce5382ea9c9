import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../config.js';
import { intArray, toDate } from '../../db/arrays.js';
import { executeInOneTrip } from '../../db/one-trip.js';
import { activeWorkSql, freeSlots } from '../rules/active-work.js';
import { availableParams, availableSql } from '../rules/availability.js';
import type { ClassCache } from '../matching/class-cache.js';
import type { Assignment } from './assign.js';
import { ASSIGN_FIRST_SQL } from './queue-heads.js';
import { notBackedOffParams } from '../rules/release-backoff.js';

const HEADS_PER_CLASS = 4; // candidates per class; more only if others keep taking them first
const ATTEMPTS = 4;

/**
 * Atomically assigns the next work request a worker may run, or returns null. The worker row is
 * locked, so one worker's concurrent calls never exceed its concurrency; candidate rows are taken
 * with SKIP LOCKED, so concurrent workers never get the same request and never wait on each other.
 * With `skipLocked` a worker locked by another transaction is passed over (null) instead of waited
 * for. Runs inside the caller's transaction.
 */
export async function assignNextWork(
  em: EntityManager,
  cache: ClassCache,
  config: Config,
  workerId: number,
  now: Date,
  options: { skipLocked?: boolean } = {},
): Promise<Assignment | null> {
  // The worker, locked, and the newest class id (to refresh the cache only when behind); then its load,
  // in a statement of its own: one that started before the lock was granted would still see the
  // snapshot from before a concurrent call of the same worker committed its assignment. Both in one
  // trip: the second statement takes its snapshot after the first has its lock.
  const [[w], [{ active }]] = await executeInOneTrip<
    [{ id: number; type: string; available: boolean; concurrency: number; provided_tags: string[]; required_tags: string[]; latest_class: number }[], { active: number }[]]
  >(em, [
    {
      sql: `select w.id, w.type, ${availableSql('w')} as available, w.concurrency, w.provided_tags, w.required_tags,
            (select coalesce(max(id), 0) from task_class) as latest_class
       from worker w where w.id = ? for update of w${options.skipLocked ? ' skip locked' : ''}`,
      params: [...availableParams(now, config.metadataFreshMs), workerId],
    },
    { sql: `select ${activeWorkSql('?')} as active`, params: [workerId] },
  ]);
  if (!w) return null; // no such worker, or (skipLocked) busy in another transaction
  if (!w.available) return null;
  if (freeSlots(w.concurrency, active) === 0) return null;

  await cache.refreshIfBehind(em, w.latest_class);
  const eligible = cache.eligibleFor({ type: w.type, providedTags: w.provided_tags, requiredTags: w.required_tags });
  if (!eligible.length) return null;
  let perClass = HEADS_PER_CLASS;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const [r] = await em.execute<{ heads: number; id: number | null; workspace_id: number | null; pending_at: Date | string | null }[]>(ASSIGN_FIRST_SQL, [
      intArray(eligible),
      perClass,
      perClass,
      ...notBackedOffParams(workerId, now),
      now,
      workerId,
    ]);
    if (r.id !== null) return { workRequestId: r.id, workerId, workspaceId: r.workspace_id!, pendingAt: toDate(r.pending_at) };
    if (r.heads === 0) return null; // nothing this worker may run
    perClass *= 4; // every head was taken or locked by a concurrent caller: look deeper
  }
  return null;
}
