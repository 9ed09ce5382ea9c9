import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import { tryLockForTransaction } from '../db/advisory-locks.js';
import { intArray, toDate } from '../db/arrays.js';
import { availableParams, availableSql } from './availability.js';
import type { ClassCache } from './class-cache.js';
import type { Assignment } from './next-work.js';
import { anyHeavyByHistory, heaviness } from './heavy.js';
import { workerPreference, workerSize } from './preference.js';
import { classHeadsSql, LOCK_ALL_SQL } from './queue-sql.js';
import { backoffsOf } from './release-backoff.js';
import type { TaskHistoryCache } from './task-history.js';

/** The sort memory of a pass's transaction: its heads are sorted in memory. */
const PASS_WORK_MEM = '64MB';
const MATCH_ROUNDS = 3; // matchings in one pass when concurrent callers hold chosen requests
/** Rounds of reading more class heads in place of heads backed off from a worker (see below). */
const BACKOFF_HEAD_ROUNDS = 4;

interface FreeWorker {
  id: number;
  free: number;
  eligible: number[];
  pooled: boolean;
  size: [number, number];
}

/**
 * One full scheduling pass, in bulk: every available worker with a free slot, every task class it may
 * run, and the heads of those classes' queues, matched in queue order in memory and written in one
 * statement. A request that no free worker can run is simply not among the heads asked for, so it
 * never blocks the requests behind it. Each request goes to the first free worker in its order of
 * preference (preference.ts), which depends on whether it is heavy work (heavy.ts: its size class or
 * its task's history). Runs inside the caller's transaction; returns the assignments.
 */
export async function runPass(em: EntityManager, cache: ClassCache, history: TaskHistoryCache, config: Config, now: Date, maxAssignments = 20_000): Promise<Assignment[]> {
  if (!(await tryLockForTransaction(em, 'PASS'))) return []; // another process is running a pass right now
  // For this transaction only: the heads statement reads as many rows as there are free slots per class
  // (a hundred thousand at a large farm), which PostgreSQL's defaults would JIT-compile (some 100 ms of
  // compilation for a statement of a few hundred) and sort on disk (work_mem 4 MB).
  await em.execute(`select set_config('jit', 'off', true), set_config('work_mem', '${PASS_WORK_MEM}', true)`);
  // Workers busy in a concurrent requestWork are skipped (SKIP LOCKED): they are being served.
  const rows = await em.execute<{ id: number; type: string; pool_id: number | null; concurrency: number; provided_tags: string[]; required_tags: string[] }[]>(
    // Tag arrays as JSON: for thousands of workers the driver's text[] parser costs a few hundred ms.
    `select id, type, pool_id, concurrency, to_json(provided_tags) as provided_tags, to_json(required_tags) as required_tags
       from worker w
      where ${availableSql('w')}
      for update skip locked`,
    availableParams(now, config.metadataFreshMs),
  );
  const loads = new Map(
    (
      await em.execute<{ worker_id: number; n: number }[]>(
        `select worker_id, count(*)::int as n from work_request where status in ('ASSIGNED', 'RUNNING') and worker_id = any(?::int[]) group by worker_id`,
        [intArray(rows.map((r) => r.id))],
      )
    ).map((r) => [r.worker_id, r.n]),
  );
  await cache.refresh(em);
  const workers: FreeWorker[] = [];
  for (const r of rows) {
    const free = r.concurrency - (loads.get(r.id) ?? 0);
    if (free <= 0) continue;
    const eligible = cache.eligibleFor({ type: r.type, providedTags: r.provided_tags, requiredTags: r.required_tags });
    if (eligible.length) workers.push({ id: r.id, free, eligible, pooled: r.pool_id !== null, size: workerSize(r.provided_tags) });
  }
  if (!workers.length) return [];

  // A class can take at most the free slots of the workers eligible for it.
  const slotsPerClass = new Map<number, number>();
  for (const w of workers) for (const c of w.eligible) slotsPerClass.set(c, Math.min(maxAssignments, (slotsPerClass.get(c) ?? 0) + w.free));
  const classIds = [...slotsPerClass.keys()];
  // A head's task matters only when some task is heavy work by its history (heavy.ts); otherwise the
  // heads are read from the queue index alone, and their task is not needed.
  const averages = await history.get(em, now);
  const headsSql = classHeadsSql(anyHeavyByHistory(averages));
  const readHeads = (extra: ReadonlyMap<number, number>) =>
    em.execute<{ id: number; class_id: number; task_type?: string; task_name?: string }[]>(headsSql, [
      intArray(classIds),
      intArray(classIds.map((c) => slotsPerClass.get(c)! + (extra.get(c) ?? 0))),
    ]);
  let heads = await readHeads(new Map());
  if (!heads.length) return [];
  // Requests released recently are not offered again to the workers that released them. A head backed
  // off from some worker may leave that worker's slot to the next request of its class: each class reads
  // one more head per backed-off head it read, until no more are found (backoffs are rare: a few rounds).
  let backoffs = await backoffsOf(
    em,
    heads.map((h) => h.id),
    now,
  );
  for (let round = 0, found = 0; round < BACKOFF_HEAD_ROUNDS; round++) {
    const extra = new Map<number, number>();
    for (const h of heads) if (backoffs.has(h.id)) extra.set(h.class_id, (extra.get(h.class_id) ?? 0) + 1);
    const total = [...extra.values()].reduce((a, b) => a + b, 0);
    if (total === found) break;
    found = total;
    heads = await readHeads(extra);
    backoffs = await backoffsOf(
      em,
      heads.map((h) => h.id),
      now,
    );
  }

  // Heaviness is per request (a class can mix tasks), so a class may need both orders of its workers:
  // one list per class and kind of work, each built only when a head of that kind needs it.
  const heavyHead = new Map(heads.map((h) => [h.id, heaviness(cache.get(h.class_id)?.requiredTags ?? [], h.task_type ?? '', h.task_name ?? '', averages).heavy]));
  const byClass = [new Map<number, FreeWorker[]>(), new Map<number, FreeWorker[]>()]; // [light, heavy]
  for (const heavy of [false, true]) {
    const wanted = new Set(heads.filter((h) => heavyHead.get(h.id) === heavy).map((h) => h.class_id));
    if (!wanted.size) continue;
    const cmp = workerPreference(heavy);
    const ordered = [...workers].sort((a, b) => cmp({ ...a, eligible: a.eligible.length }, { ...b, eligible: b.eligible.length }));
    const lists = byClass[Number(heavy)];
    for (const w of ordered) {
      for (const c of w.eligible) {
        if (!wanted.has(c)) continue;
        let list = lists.get(c);
        if (!list) lists.set(c, (list = []));
        list.push(w);
      }
    }
  }
  const initialFree = new Map(workers.map((w) => [w, w.free]));
  type Match = Omit<Assignment, 'workspaceId'>;
  const match = (skipped: ReadonlySet<number>): Match[] => {
    for (const [w, free] of initialFree) w.free = free;
    // Free slots only ever decrease, so each list's cursor only moves forward: linear in all.
    const cursors = [new Map<number, number>(), new Map<number, number>()];
    const nextFree = (list: FreeWorker[], cursor: Map<number, number>, classId: number): FreeWorker | undefined => {
      let i = cursor.get(classId) ?? 0;
      while (i < list.length && list[i].free <= 0) i++;
      cursor.set(classId, i);
      return list[i];
    };
    // The first free worker of the class, in the order for the request's kind of work, that the
    // request is not backed off from (rare: a scan).
    const nextFreeFor = (head: { id: number; class_id: number }): FreeWorker | undefined => {
      const kind = Number(heavyHead.get(head.id));
      const list = byClass[kind].get(head.class_id);
      if (!list) return undefined;
      const first = nextFree(list, cursors[kind], head.class_id);
      const avoid = backoffs.get(head.id);
      if (!first || !avoid?.some((b) => b.workerId === first.id)) return first;
      return list.slice(cursors[kind].get(head.class_id)).find((w) => w.free > 0 && !avoid.some((b) => b.workerId === w.id));
    };
    const out: Match[] = [];
    for (const head of heads) {
      if (out.length >= maxAssignments) break;
      if (skipped.has(head.id)) continue;
      const worker = nextFreeFor(head);
      if (!worker) continue;
      worker.free--;
      out.push({ workRequestId: head.id, workerId: worker.id });
    }
    return out;
  };
  // Match first, then lock only the chosen requests: the heads are up to every class's free slots and
  // classes share workers, so locking them all would lock many times more rows than get assigned.
  // A chosen request that a concurrent requestWork holds is skipped and the matching runs again.
  const skipped = new Set<number>();
  const held = new Set<number>();
  let chosen: Match[] = [];
  for (let round = 0; round < MATCH_ROUNDS; round++) {
    chosen = match(skipped);
    const toLock = chosen.map((a) => a.workRequestId).filter((id) => !held.has(id));
    if (!toLock.length) break;
    for (const r of await em.execute<{ id: number }[]>(LOCK_ALL_SQL, [intArray(toLock)])) held.add(r.id);
    const missed = toLock.filter((id) => !held.has(id));
    if (!missed.length) break;
    for (const id of missed) skipped.add(id);
  }
  const assignments = chosen.filter((a) => held.has(a.workRequestId));
  if (!assignments.length) return [];
  const updated = await em.execute<{ id: number; workspace_id: number; pending_at: Date | string | null }[]>(
    `update work_request w set status = 'ASSIGNED', worker_id = v.worker_id, assigned_at = ?
       from unnest(?::int[], ?::int[]) as v(id, worker_id) where w.id = v.id
     returning w.id, w.workspace_id, w.pending_at`,
    [now, intArray(assignments.map((a) => a.workRequestId)), intArray(assignments.map((a) => a.workerId))],
  );
  const rowOf = new Map(updated.map((r) => [r.id, r]));
  return assignments.map((a) => ({ ...a, workspaceId: rowOf.get(a.workRequestId)!.workspace_id, pendingAt: toDate(rowOf.get(a.workRequestId)!.pending_at) }));
}
