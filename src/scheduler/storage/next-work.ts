import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkersConfig } from '../../core/config/workers.js';
import { intArray, toDate } from '../../storage/db/arrays.js';
import { executeInOneTrip, type TripStatement } from '../../storage/db/one-trip.js';
import { activeWorkSql, freeSlots, hasFreeSlotSql } from '../rules/active-work.js';
import { availableParams, availableSql } from '../rules/availability.js';
import type { ClassCache } from '../matching/class-cache.js';
import type { WorkerTags } from '../rules/fit.js';
import type { NextAssignment } from './assign.js';
import { ASSIGN_FIRST_SQL, assignFirstSql } from './queue-heads.js';
import { notBackedOffParams } from '../rules/release-backoff.js';
import { assignOnHost } from './host-pull.js';
import type { DurationHistory } from './task-history.js';

const HEADS_PER_CLASS = 4; // candidates per class; more only if others keep taking them first
const ATTEMPTS = 4;

/** A worker's call to record in the pull's trip: a SET list over its row and the list's parameters (services/workers/presence.ts seenByCall). */
export interface CallSeen {
  readonly set: string;
  readonly params: readonly unknown[];
}

export type { NextAssignment } from './assign.js';

/** How many workers' shapes PullShapes keeps; past it, it starts again empty (a pull then takes the long way once). */
const PULL_SHAPES_KEPT = 100_000;

/**
 * The shapes (type and tags, with the version PostgreSQL gives each shape: migration worker_shape) of
 * the workers whose pulls this process has made, so that a worker's next pull can find its eligible
 * classes without reading its row first (assignNextWorkInOneTrip).
 */
export class PullShapes {
  private readonly byWorker = new Map<number, PullShape>();

  get(workerId: number): PullShape | undefined {
    return this.byWorker.get(workerId);
  }

  set(workerId: number, shape: PullShape): void {
    if (this.byWorker.size >= PULL_SHAPES_KEPT && !this.byWorker.has(workerId)) this.byWorker.clear();
    this.byWorker.set(workerId, shape);
  }
}

/**
 * A worker's shape as a pull needs it: its type and tags, and the version PostgreSQL gave that shape;
 * and whether it shares its resources, as last read (such a worker's pull takes the long way: host-pull.ts).
 */
export type PullShape = WorkerTags & { readonly version: string; readonly offersResources?: boolean };

/**
 * The first statement of a pull that may wait for the worker's row lock: PostgreSQL's lock_timeout for the
 * pull's own transaction (`set_config(..., true)`: transaction-local), so that a lock held by a transaction
 * that hangs (its host gone silent, its process paused) ends the pull's wait after `ms` with SQLSTATE 55P03
 * (isLockTimeout) instead of making it wait as long as that lock is held. None for 0 (the server's own setting, by default no limit).
 * It goes in the trip of the pull's first statements: no round trip of its own.
 */
function lockTimeoutStatements(ms: number): TripStatement[] {
  return ms > 0 ? [{ sql: `select set_config('lock_timeout', ?, true)`, params: [`${ms}ms`] }] : [];
}

/** Whether an error is PostgreSQL's lock_timeout (SQLSTATE 55P03, lock_not_available): a pull that waited too long for a lock. */
export function isLockTimeout(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '55P03';
}

/** The transaction-local setting through which a one-trip pull's second statement knows that its first took the worker's lock. */
const LOCKED_SETTING = 'tagsched.pull_locked';

/**
 * assignNextWork in one round trip, outside any transaction, for a worker of a known `shape`:
 * PostgreSQL runs the trip as one transaction (one-trip.ts). Its first statement locks the worker
 * (recording its call, with `seen`; or, with `skipLocked`, passing over a worker locked elsewhere); the
 * second, with a snapshot taken after that lock, assigns the first request of the classes the shape
 * may run, only if it took the lock, the worker still has that shape (its version), no class is newer
 * than the cache's, and the worker is available with a free slot: the rules of assignNextWork. Answers
 * the assignment, null (locked elsewhere with `skipLocked`, unavailable, full, or nothing it may run),
 * or undefined when assignNextWork must decide: in a transaction already, the shape changed, a class is
 * newer, or every head it looked at was taken by a concurrent caller. The call is recorded whenever
 * the lock is taken. Unless it skips a locked worker, it waits for the worker's lock no longer than
 * `config.pullLockTimeoutMs`: past it, it throws PostgreSQL's error (isLockTimeout) and the trip's
 * implicit transaction is rolled back.
 */
export async function assignNextWorkInOneTrip(
  em: EntityManager,
  cache: ClassCache,
  config: WorkersConfig,
  workerId: number,
  shape: PullShape,
  now: Date,
  options: { skipLocked?: boolean; seen?: CallSeen } = {},
): Promise<NextAssignment | null | undefined> {
  if (options.seen && options.skipLocked)
    throw new Error('assignNextWorkInOneTrip: a recorded call (seen) waits for the worker; it cannot skip it');
  // A worker that shares its resources pulls the long way; a flag changed since it was read is caught
  // by the statement's own check (fit_), and the long way reads it again.
  if (em.isInTransaction() || shape.offersResources) return undefined;
  const eligible = cache.eligibleFor(shape);
  const guard = {
    cte: `select current_setting('${LOCKED_SETTING}', true) is not distinct from ? as locked_,
                 w.shape_version = ?::bigint and (select coalesce(max(id), 0) from task_class) <= ? and not w.offers_resources as fit_,
                 ${availableSql('w')} and ${hasFreeSlotSql('w')} as free_
            from worker w where w.id = ?`,
    holds: 'locked_ and fit_ and free_',
  };
  // The lock's statement marks, in a setting of the trip's transaction, that it took the lock: with
  // SKIP LOCKED it may not have, and the assignment must then not be made. The mark is made on the rows
  // the lock let through: over a locking subquery (which PostgreSQL never flattens), or in RETURNING. A
  // mark in the locking query's own select list would be computed before the lock is tried.
  const mark = `set_config('${LOCKED_SETTING}', w.id::text, true)`;
  const lock: TripStatement = options.seen
    ? {
        sql: `update worker w set ${options.seen.set} where w.id = ? returning ${mark}`,
        params: [...options.seen.params, workerId],
      }
    : {
        sql: `select ${mark} from (select id from worker where id = ? for update${options.skipLocked ? ' skip locked' : ''}) w`,
        params: [workerId],
      };
  const timeout = options.skipLocked ? [] : lockTimeoutStatements(config.pullLockTimeoutMs);
  const results = await executeInOneTrip<unknown[][]>(em, [
    ...timeout,
    lock,
    {
      sql: assignFirstSql(guard),
      params: [
        String(workerId),
        shape.version,
        cache.latestId,
        ...availableParams(now, config.metadataFreshMs),
        workerId,
        intArray(eligible),
        HEADS_PER_CLASS,
        HEADS_PER_CLASS,
        ...notBackedOffParams(workerId, now),
        now,
        workerId,
      ],
    },
  ]);
  const [, [{ locked_: locked, fit_: fit, free_: free, heads_: heads, ...row }]] = results.slice(timeout.length) as [
    unknown[],
    ({ locked_: boolean | null; fit_: boolean | null; free_: boolean | null; heads_: number } & Record<
      string,
      unknown
    >)[],
  ];
  if (locked === null) return null; // no such worker
  if (!locked) return options.skipLocked ? null : undefined; // busy in another transaction
  if (!fit) return undefined;
  if (!free) return null;
  if (row.id !== null) return assignmentOf(workerId, row);
  return heads === 0 ? null : undefined;
}

const assignmentOf = (workerId: number, row: Record<string, unknown>): NextAssignment => ({
  workRequestId: row.id as number,
  workerId,
  workspaceId: row.workspace_id as number,
  pendingAt: toDate(row.pending_at as Date | string | null),
  row,
});

/**
 * Atomically assigns the next work request a worker may run, or returns null. The worker row is
 * locked, so one worker's concurrent calls never exceed its concurrency; candidate rows are taken
 * with SKIP LOCKED, so concurrent workers never get the same request and never wait on each other.
 * With `skipLocked` a worker locked by another transaction is passed over (null) instead of waited
 * for. With `seen` (not with `skipLocked`: its UPDATE waits for the lock), the worker's call is
 * recorded first, in the same trip as the lock. With `shapes`, the worker's shape is kept there for
 * its next pulls (assignNextWorkInOneTrip). Runs inside the caller's transaction. Unless it skips a
 * locked worker, it sets the transaction's lock_timeout to `config.pullLockTimeoutMs` first (in the same
 * trip): a lock held longer fails the transaction with PostgreSQL's error (isLockTimeout).
 */
export async function assignNextWork(
  em: EntityManager,
  cache: ClassCache,
  config: WorkersConfig,
  workerId: number,
  now: Date,
  options: { skipLocked?: boolean; seen?: CallSeen; shapes?: PullShapes; durations?: DurationHistory } = {},
): Promise<NextAssignment | null> {
  if (options.seen && options.skipLocked)
    throw new Error('assignNextWork: a recorded call (seen) waits for the worker; it cannot skip it');
  // The worker, locked, and the newest class id (to refresh the cache only when behind); then its load,
  // in a statement of its own: one that started before the lock was granted would still see the
  // snapshot from before a concurrent call of the same worker committed its assignment. Both in one
  // trip: the second statement takes its snapshot after the first has its lock. The call's record, when
  // given, goes first: its UPDATE takes the same row lock.
  type Locked = {
    id: number;
    type: string;
    version: string;
    available: boolean;
    concurrency: number;
    provided_tags: string[];
    required_tags: string[];
    latest_class: number;
    offers_resources: boolean;
    offered_cpus: number;
    offered_memory_mib: number;
    offered_disk_mib: number;
  };
  const before: TripStatement[] = [
    ...(options.skipLocked ? [] : lockTimeoutStatements(config.pullLockTimeoutMs)),
    ...(options.seen
      ? [{ sql: `update worker set ${options.seen.set} where id = ?`, params: [...options.seen.params, workerId] }]
      : []),
  ];
  const results = await executeInOneTrip<unknown[][]>(em, [
    ...before,
    {
      sql: `select w.id, w.type, w.shape_version::text as version, ${availableSql('w')} as available, w.concurrency, w.provided_tags, w.required_tags,
            w.offers_resources, w.offered_cpus, w.offered_memory_mib, w.offered_disk_mib,
            (select coalesce(max(id), 0) from task_class) as latest_class
       from worker w where w.id = ? for update of w${options.skipLocked ? ' skip locked' : ''}`,
      params: [...availableParams(now, config.metadataFreshMs), workerId],
    },
    { sql: `select ${activeWorkSql('?')} as active`, params: [workerId] },
  ]);
  const [[w], [{ active }]] = results.slice(before.length) as [Locked[], { active: number }[]];
  if (!w) return null; // no such worker, or (skipLocked) busy in another transaction
  options.shapes?.set(workerId, {
    version: w.version,
    type: w.type,
    providedTags: w.provided_tags,
    requiredTags: w.required_tags,
    offersResources: w.offers_resources,
  });
  if (!w.available) return null;
  if (freeSlots(w.concurrency, active) === 0) return null;

  await cache.refreshIfBehind(em, w.latest_class);
  const eligible = cache.eligibleFor({ type: w.type, providedTags: w.provided_tags, requiredTags: w.required_tags });
  if (!eligible.length) return null;
  if (w.offers_resources) {
    const offered = { cpus: w.offered_cpus, memoryMib: w.offered_memory_mib, diskMib: w.offered_disk_mib };
    return assignOnHost(em, { id: workerId, offered }, eligible, now, options.durations);
  }
  let perClass = HEADS_PER_CLASS;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const [{ heads_: heads, ...row }] = await em.execute<({ heads_: number } & Record<string, unknown>)[]>(
      ASSIGN_FIRST_SQL,
      [intArray(eligible), perClass, perClass, ...notBackedOffParams(workerId, now), now, workerId],
    );
    if (row.id !== null) return assignmentOf(workerId, row);
    if (heads === 0) return null; // nothing this worker may run
    perClass *= 4; // every head was taken or locked by a concurrent caller: look deeper
  }
  return null;
}
