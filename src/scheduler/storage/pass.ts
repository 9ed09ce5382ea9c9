import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkersConfig } from '../../core/config/workers.js';
import { tryLockForTransaction } from '../../storage/db/advisory-locks.js';
import { intArray } from '../../storage/db/arrays.js';
import type { ClassCache } from '../matching/class-cache.js';
import { PassMatching, type FreeWorker, type Head, type Match, type PassOptions } from '../matching/pass-matching.js';
import { activeByWorkerSql, freeSlots, hasFreeSlotSql } from '../rules/active-work.js';
import { availableParams, availableSql } from '../rules/availability.js';
import { anyHeavyByHistory, heaviness, type TaskHistory } from '../rules/heavy-work.js';
import { placementFigures } from '../rules/placement-preference.js';
import { assignRequests, type Assignment } from './assign.js';
import { passOverHosts, type HostRow } from './host-pass.js';
import { classHeadsSql, LOCK_ALL_SQL } from './queue-heads.js';
import { backoffsOf } from './release-backoffs.js';
import type { TaskHistoryCache } from './task-history.js';

/** The sort memory of a pass's transaction: its heads are sorted in memory. */
const PASS_WORK_MEM = '64MB';
const MATCH_ROUNDS = 3; // matchings in one pass when concurrent callers hold chosen requests

/** A head as classHeadsSql returns it: the fair key and the creation time (µs) as text, exact. */
interface HeadRow {
  id: number;
  class_id: number;
  prio: number;
  fair_key: string;
  created_us: string;
  task_type?: string;
  task_name?: string;
}

/**
 * One full scheduling pass, in bulk: every available worker with a free slot, every task class it may
 * run, and the heads of those classes' queues, matched in queue order in memory and written in one
 * statement. A request that no free worker can run is simply not among the heads asked for, so it
 * never blocks the requests behind it. The steps: read the free workers (readFreeWorkers), read and
 * match heads until the matching is the full read's (matchAsFullRead, matching/pass-matching.ts),
 * lock the chosen requests (lockChosen), write the assignments (assignRequests). Runs inside the
 * caller's transaction; returns the assignments. Workers that share their resources are not matched
 * here but take what their own pulls would (passHosts, host-pass.ts).
 */
export async function runPass(
  em: EntityManager,
  cache: ClassCache,
  history: TaskHistoryCache,
  config: WorkersConfig,
  now: Date,
  maxAssignments = 20_000,
  options: PassOptions = {},
): Promise<Assignment[]> {
  if (!(await tryLockForTransaction(em, 'PASS'))) return []; // another process is running a pass right now
  // For this transaction only: the heads statement reads as many rows as there are free slots per class
  // (a hundred thousand at a large farm), which PostgreSQL's defaults would JIT-compile (some 100 ms of
  // compilation for a statement of a few hundred) and sort on disk (work_mem 4 MB).
  await em.execute(`select set_config('jit', 'off', true), set_config('work_mem', '${PASS_WORK_MEM}', true)`);
  const workers = await readFreeWorkers(em, cache, config, now);
  const averages = await history.get(em, now);
  const slotted = workers.length ? await passSlots(em, cache, averages, workers, now, maxAssignments, options) : [];
  const hosts = await passHosts(em, cache, averages, config, now, maxAssignments - slotted.length);
  return [...slotted, ...hosts];
}

/** The pass over the workers with slots: their heads matched in memory, the chosen requests locked and assigned in one statement. */
async function passSlots(
  em: EntityManager,
  cache: ClassCache,
  averages: TaskHistory,
  workers: FreeWorker[],
  now: Date,
  maxAssignments: number,
  options: PassOptions,
): Promise<Assignment[]> {
  const matching = new PassMatching(workers, now, maxAssignments, options);
  const read = headsReader(em, cache, averages, matching, now);
  await read(matching.classIds);
  if (matching.empty) return [];
  const chosen = await lockChosen(em, matching, read);
  return assignRequests(em, chosen, now);
}

/**
 * The pass over the workers that share their resources: each available one under its concurrency, its
 * row locked (SKIP LOCKED: one busy in a pull is being served), takes what its own pulls would take
 * (host-pass.ts, in bulk), at most `maxAssignments` in all.
 */
async function passHosts(
  em: EntityManager,
  cache: ClassCache,
  averages: TaskHistory,
  config: WorkersConfig,
  now: Date,
  maxAssignments: number,
): Promise<Assignment[]> {
  if (maxAssignments <= 0) return [];
  const rows = await em.execute<
    {
      id: number;
      type: string;
      concurrency: number;
      provided_tags: string[];
      required_tags: string[];
      offered_cpus: number;
      offered_memory_mib: number;
      offered_disk_mib: number;
    }[]
  >(
    `select id, type, concurrency, to_json(provided_tags) as provided_tags, to_json(required_tags) as required_tags,
            offered_cpus, offered_memory_mib, offered_disk_mib
       from worker w
      where w.offers_resources and ${availableSql('w')} and ${hasFreeSlotSql('w')}
      order by w.id
      for update skip locked`,
    availableParams(now, config.metadataFreshMs),
  );
  if (!rows.length) return [];
  await cache.refresh(em);
  const loads = await loadsOf(
    em,
    rows.map((r) => r.id),
  );
  const hosts: HostRow[] = [];
  for (const r of rows) {
    const eligible = cache.eligibleFor({ type: r.type, providedTags: r.provided_tags, requiredTags: r.required_tags });
    const free = freeSlots(r.concurrency, loads.get(r.id) ?? 0);
    if (eligible.length && free > 0)
      hosts.push({
        id: r.id,
        offered: { cpus: r.offered_cpus, memoryMib: r.offered_memory_mib, diskMib: r.offered_disk_mib },
        freeSlots: free,
        eligible,
      });
  }
  return passOverHosts(em, hosts, averages, now, maxAssignments);
}

/**
 * Read: every available worker with a free slot and the classes it may run, its row locked. Workers
 * busy in a concurrent requestWork are skipped (SKIP LOCKED): they are being served. Only workers
 * with a free slot are read and locked (a busy farm's pass reads none, not all of them); their
 * loads are then counted again under the lock, which is what the free slots are taken from.
 */
async function readFreeWorkers(
  em: EntityManager,
  cache: ClassCache,
  config: WorkersConfig,
  now: Date,
): Promise<FreeWorker[]> {
  const rows = await em.execute<
    {
      id: number;
      type: string;
      pool_id: number | null;
      concurrency: number;
      provided_tags: string[];
      required_tags: string[];
    }[]
  >(
    // Tag arrays as JSON: for thousands of workers the driver's text[] parser costs a few hundred ms.
    `select id, type, pool_id, concurrency, to_json(provided_tags) as provided_tags, to_json(required_tags) as required_tags
       from worker w
      where ${availableSql('w')}
        and ${hasFreeSlotSql('w')}
        and not w.offers_resources
      for update skip locked`,
    availableParams(now, config.metadataFreshMs),
  );
  const loads = await loadsOf(
    em,
    rows.map((r) => r.id),
  );
  await cache.refresh(em);
  const workers: FreeWorker[] = [];
  for (const r of rows) {
    const free = freeSlots(r.concurrency, loads.get(r.id) ?? 0);
    if (free <= 0) continue;
    const eligible = cache.eligibleFor({ type: r.type, providedTags: r.provided_tags, requiredTags: r.required_tags });
    if (eligible.length)
      workers.push({ id: r.id, free, eligible, pooled: r.pool_id !== null, ...placementFigures(r.provided_tags) });
  }
  return workers;
}

/**
 * Read: a function that reads more heads of some classes, up to the matching's limits and after those
 * read before, with the backoffs in force of the new ones, and hands them to the matching. A head's
 * task is read only when some task is heavy work by its history (rules/heavy-work.ts); otherwise the
 * heads come from the queue index alone.
 */
function headsReader(
  em: EntityManager,
  cache: ClassCache,
  averages: TaskHistory,
  matching: PassMatching,
  now: Date,
): (classes: number[]) => Promise<void> {
  const headsSql = classHeadsSql(anyHeavyByHistory(averages));
  const task = new Map<number, { type: string; name: string }>();
  const isHeavy = (h: Head) =>
    heaviness(
      cache.get(h.classId)?.requiredTags ?? [],
      task.get(h.id)?.type ?? '',
      task.get(h.id)?.name ?? '',
      averages,
    ).heavy;
  return async (classes) => {
    const next = matching.toRead(classes);
    const rows = await em.execute<HeadRow[]>(headsSql, [
      intArray(next.classes),
      intArray(next.limits),
      intArray(next.skips),
    ]);
    const heads = rows.map((r): Head => ({
      id: r.id,
      classId: r.class_id,
      prio: r.prio,
      fairKey: BigInt(r.fair_key),
      createdUs: BigInt(r.created_us),
    }));
    for (const r of rows)
      if (r.task_type !== undefined && !task.has(r.id)) task.set(r.id, { type: r.task_type, name: r.task_name ?? '' });
    // Requests released recently are not offered again to the workers that released them.
    const backoffs = await backoffsOf(
      em,
      heads.filter((h) => !matching.has(h.id)).map((h) => h.id),
      now,
    );
    matching.add(classes, heads, backoffs, isHeavy);
  };
}

/**
 * Match, then lock: the matching of the full read (more heads read where it needs them), then only
 * the chosen requests locked (SKIP LOCKED): the heads are more than get assigned, and classes share
 * workers, so locking them all would lock rows for nothing. A chosen request that a concurrent
 * requestWork holds is skipped and the matching runs again. Returns the matches whose rows are held.
 */
async function lockChosen(
  em: EntityManager,
  matching: PassMatching,
  read: (classes: number[]) => Promise<void>,
): Promise<Match[]> {
  const matchAsFullRead = async (skipped: ReadonlySet<number>): Promise<Match[]> => {
    for (let round = 0; ; round++) {
      const result = matching.match(skipped);
      const grow = matching.growth(round, result);
      if (!grow.length) return result.out;
      await read(grow);
    }
  };
  const skipped = new Set<number>();
  const held = new Set<number>();
  let chosen: Match[] = [];
  for (let round = 0; round < MATCH_ROUNDS; round++) {
    chosen = await matchAsFullRead(skipped);
    const toLock = chosen.map((a) => a.workRequestId).filter((id) => !held.has(id));
    if (!toLock.length) break;
    for (const r of await em.execute<{ id: number }[]>(LOCK_ALL_SQL, [intArray(toLock)])) held.add(r.id);
    const missed = toLock.filter((id) => !held.has(id));
    if (!missed.length) break;
    for (const id of missed) skipped.add(id);
  }
  return chosen.filter((a) => held.has(a.workRequestId));
}

/** How many requests each of the workers `ids` holds, counted now (those that hold none are left out). */
async function loadsOf(em: EntityManager, ids: readonly number[]): Promise<Map<number, number>> {
  const rows = await em.execute<{ worker_id: number; n: number }[]>(
    `select worker_id, active as n from ${activeByWorkerSql('a.worker_id = any(?::int[])')} x`,
    [intArray(ids)],
  );
  return new Map(rows.map((r) => [r.worker_id, r.n]));
}
