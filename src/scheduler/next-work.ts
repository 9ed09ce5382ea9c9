import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import { intArray } from '../db/arrays.js';
import { unavailableReason } from './availability.js';
import type { ClassCache } from './class-cache.js';
import { CLASS_HEADS_EVEN_SQL, LOCK_FIRST_SQL } from './queue-sql.js';

const HEADS_PER_CLASS = 4; // candidates per class; more only if others keep taking them first
const ATTEMPTS = 4;

/** A fresh assignment: which request went to which worker. */
export interface Assignment {
  readonly workRequestId: number;
  readonly workerId: number;
}

/**
 * Atomically assigns the next work request a worker may run, or returns null. The worker row is
 * locked, so one worker's concurrent calls never exceed its concurrency; candidate rows are taken
 * with SKIP LOCKED, so concurrent workers never get the same request and never wait on each other.
 * Runs inside the caller's transaction.
 */
export async function assignNextWork(em: EntityManager, cache: ClassCache, config: Config, workerId: number, now: Date): Promise<Assignment | null> {
  const [w] = await em.execute<
    { id: number; type: string; enabled: boolean; draining: boolean; shutting_down: boolean; terminated_at: Date | null; connected_at: Date | null; last_seen_at: Date | null; concurrency: number; provided_tags: string[]; required_tags: string[] }[]
  >(
    `select id, type, enabled, draining, shutting_down, terminated_at, connected_at, last_seen_at, concurrency, provided_tags, required_tags
       from worker where id = ? for update`,
    [workerId],
  );
  if (!w) return null;
  const facts = { type: w.type, enabled: w.enabled, draining: w.draining, shuttingDown: w.shutting_down, terminatedAt: w.terminated_at, connectedAt: w.connected_at, lastSeenAt: w.last_seen_at };
  if (unavailableReason(facts, now, config.metadataFreshMs)) return null;
  const [{ n }] = await em.execute<{ n: number }[]>(`select count(*)::int as n from work_request where worker_id = ? and status in ('ASSIGNED', 'RUNNING')`, [workerId]);
  if (n >= w.concurrency) return null;

  await cache.refresh(em);
  const eligible = cache.eligibleFor({ type: w.type, providedTags: w.provided_tags, requiredTags: w.required_tags });
  if (!eligible.length) return null;
  let perClass = HEADS_PER_CLASS;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const heads = await em.execute<{ id: number }[]>(CLASS_HEADS_EVEN_SQL, [intArray(eligible), perClass, perClass]);
    if (!heads.length) return null;
    const [locked] = await em.execute<{ id: number }[]>(LOCK_FIRST_SQL, [intArray(heads.map((h) => h.id))]);
    if (locked) {
      await em.execute(`update work_request set status = 'ASSIGNED', worker_id = ?, assigned_at = ? where id = ?`, [workerId, now, locked.id]);
      return { workRequestId: locked.id, workerId };
    }
    perClass *= 4; // every head was taken or locked by a concurrent caller: look deeper
  }
  return null;
}
