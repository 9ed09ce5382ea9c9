import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../config.js';
import { tryLockForTransaction } from '../../db/advisory-locks.js';
import { intArray, toDate } from '../../db/arrays.js';
import { activeByWorkerSql, freeSlots } from '../rules/active-work.js';
import { availableParams, availableSql } from '../rules/availability.js';
import type { ClassCache } from '../matching/class-cache.js';
import type { Assignment } from './next-work.js';
import { anyHeavyByHistory, heaviness } from '../rules/heavy-work.js';
import { workerPreference, workerSize } from '../rules/placement-preference.js';
import { queueBefore } from '../rules/queue-order.js';
import { classHeadsSql, LOCK_ALL_SQL } from './queue-heads.js';
import type { Backoff } from '../rules/release-backoff.js';
import { backoffsOf } from './release-backoffs.js';
import type { TaskHistoryCache } from './task-history.js';

/** The sort memory of a pass's transaction: its heads are sorted in memory. */
const PASS_WORK_MEM = '64MB';
const MATCH_ROUNDS = 3; // matchings in one pass when concurrent callers hold chosen requests
/** Rounds of reading more class heads in place of heads backed off from a worker (see below). */
const BACKOFF_HEAD_ROUNDS = 4;
/** The fewest heads a class reads first (more when there are more free slots per class). */
const FIRST_HEADS_MIN = 4;
/** Rounds in which a class that may need more heads reads as many more as its workers may take, before all it may need. */
const GROW_ROUNDS = 4;
const GROWTH = 4;

interface HeadRow {
  id: number;
  class_id: number;
  prio: number;
  fair_key: string;
  created_us: string;
  task_type?: string;
  task_name?: string;
}
interface Head extends HeadRow {
  fairKey: bigint;
  createdUs: bigint;
}

/** Two lists of heads in queue order merged into one. */
function mergeHeads(a: Head[], b: Head[]): Head[] {
  if (!a.length) return b;
  const out: Head[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) out.push(queueBefore(b[j], a[i]) ? b[j++] : a[i++]);
  while (i < a.length) out.push(a[i++]);
  while (j < b.length) out.push(b[j++]);
  return out;
}

/** For tests: the first number of heads per class, and whether to read every class as far as the full read does. */
export interface PassOptions {
  firstHeads?: number;
  readAll?: boolean;
}

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
export async function runPass(
  em: EntityManager,
  cache: ClassCache,
  history: TaskHistoryCache,
  config: Config,
  now: Date,
  maxAssignments = 20_000,
  options: PassOptions = {},
): Promise<Assignment[]> {
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
      await em.execute<{ worker_id: number; n: number }[]>(`select worker_id, active as n from ${activeByWorkerSql('a.worker_id = any(?::int[])')} x`, [
        intArray(rows.map((r) => r.id)),
      ])
    ).map((r) => [r.worker_id, r.n]),
  );
  await cache.refresh(em);
  const workers: FreeWorker[] = [];
  for (const r of rows) {
    const free = freeSlots(r.concurrency, loads.get(r.id) ?? 0);
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

  // What the pass assigns is defined by the *full read*: per class as many heads as its slots, plus one
  // per backed-off head among them (repeated, BACKOFF_HEAD_ROUNDS times at most: `fullLimit`), matched
  // in queue order. Classes share workers, so that reads many times more heads than get assigned.
  // The pass reads a few heads per class first and more only where the full read could differ: once a
  // head of a class finds no eligible worker with a free slot, no later head of that class can (free
  // slots only decrease), so the heads it did not read would have got nothing. A class whose unread
  // heads might matter (its page came back full, it never ran out of workers) reads more and the
  // matching runs again; the result is the full read's, with about as many heads as assignments.
  const totalFree = workers.reduce((n, w) => n + w.free, 0);
  const first = options.firstHeads ?? Math.max(FIRST_HEADS_MIN, Math.ceil(totalFree / classIds.length));
  const limitOf = new Map(classIds.map((c) => [c, Math.min(slotsPerClass.get(c)!, first)]));
  const headsOf = new Map<number, Head[]>();
  const backoffs = new Map<number, Backoff[]>();
  const heavyHead = new Map<number, boolean>();
  let heads: Head[] = [];
  // Reads more heads of these classes, up to their limits, after those read before.
  const read = async (classes: number[]) => {
    const had = classes.map((c) => headsOf.get(c)?.length ?? 0);
    const rows = await em.execute<HeadRow[]>(headsSql, [intArray(classes), intArray(classes.map((c, i) => limitOf.get(c)! - had[i])), intArray(had)]);
    // A concurrent change of a queue can shift its heads between two reads: a head seen twice is kept once.
    const fresh: Head[] = rows.filter((r) => !heavyHead.has(r.id)).map((r) => ({ ...r, fairKey: BigInt(r.fair_key), createdUs: BigInt(r.created_us) }));
    for (const c of classes) if (!headsOf.has(c)) headsOf.set(c, []);
    for (const h of fresh) headsOf.get(h.class_id)!.push(h);
    // Requests released recently are not offered again to the workers that released them.
    for (const [id, list] of await backoffsOf(
      em,
      fresh.map((h) => h.id),
      now,
    ))
      backoffs.set(id, list);
    for (const h of fresh) heavyHead.set(h.id, heaviness(cache.get(h.class_id)?.requiredTags ?? [], h.task_type ?? '', h.task_name ?? '', averages).heavy);
    heads = mergeHeads(heads, fresh);
  };
  await read(classIds);
  if (!heads.length) return [];

  // The full read's number of heads of a class, when the heads read so far tell it (the class is read
  // to its end, or far enough), else how many it reads at least (more than were read).
  const moreNeeded = (c: number): number | undefined => {
    const got = headsOf.get(c)!;
    if (got.length < limitOf.get(c)!) return undefined; // the whole queue of the class
    const slots = slotsPerClass.get(c)!;
    const backedOff = (n: number) => got.slice(0, n).filter((h) => backoffs.has(h.id)).length;
    // A head backed off from some worker may leave that worker's slot to the next request of its class:
    // the full read takes one more head per backed-off head it read, until no more are found.
    let limit = slots;
    for (let round = 0; ; round++) {
      if (limit > got.length) return limit;
      if (round === BACKOFF_HEAD_ROUNDS) return undefined;
      const next = slots + backedOff(limit);
      if (next === limit) return undefined;
      limit = next;
    }
  };

  // Heaviness is per request (a class can mix tasks), so a class may need both orders of its workers:
  // one list per class and kind of work, each built only when a head of that kind needs it.
  const byClass = [new Map<number, FreeWorker[]>(), new Map<number, FreeWorker[]>()]; // [light, heavy]
  const ordered: (FreeWorker[] | undefined)[] = [undefined, undefined];
  const buildLists = () => {
    for (const heavy of [false, true]) {
      const lists = byClass[Number(heavy)];
      const wanted = new Set(heads.filter((h) => heavyHead.get(h.id) === heavy && !lists.has(h.class_id)).map((h) => h.class_id));
      if (!wanted.size) continue;
      const cmp = workerPreference(heavy);
      const order = (ordered[Number(heavy)] ??= [...workers].sort((a, b) => cmp({ ...a, eligible: a.eligible.length }, { ...b, eligible: b.eligible.length })));
      for (const c of wanted) lists.set(c, []);
      for (const w of order) for (const c of w.eligible) if (wanted.has(c)) lists.get(c)!.push(w);
    }
  };
  const initialFree = new Map(workers.map((w) => [w, w.free]));
  type Match = Omit<Assignment, 'workspaceId'>;
  /** The matching of the heads read, and the classes whose unread heads cannot change it. */
  const match = (skipped: ReadonlySet<number>): { out: Match[]; settled: Set<number>; freeAfter: Map<number, number> } => {
    for (const [w, free] of initialFree) w.free = free;
    // A class is settled when, at a head of it (or right after its last head read), no eligible worker
    // had a free slot left, or when the matching stopped (maxAssignments) before its last head read.
    // Otherwise the free slots of its workers right after its last head is how many more heads it may use.
    const settled = new Set<number>();
    const freeAfter = new Map<number, number>();
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
    const nextFreeFor = (head: Head): FreeWorker | undefined => {
      const kind = Number(heavyHead.get(head.id));
      const list = byClass[kind].get(head.class_id) ?? [];
      const first = nextFree(list, cursors[kind], head.class_id);
      if (!first) settled.add(head.class_id); // no eligible worker has a free slot left (whatever the kind)
      const avoid = backoffs.get(head.id);
      if (!first || !avoid?.some((b) => b.workerId === first.id)) return first;
      return list.slice(cursors[kind].get(head.class_id)).find((w) => w.free > 0 && !avoid.some((b) => b.workerId === w.id));
    };
    const out: Match[] = [];
    for (const [i, head] of heads.entries()) {
      if (out.length >= maxAssignments) {
        for (const h of heads.slice(i)) settled.add(h.class_id);
        break;
      }
      if (!skipped.has(head.id)) {
        const worker = nextFreeFor(head);
        if (worker) {
          worker.free--;
          out.push({ workRequestId: head.id, workerId: worker.id });
        }
      }
      const ofClass = headsOf.get(head.class_id)!;
      if (ofClass[ofClass.length - 1] === head && !settled.has(head.class_id)) {
        const free = (byClass[0].get(head.class_id) ?? byClass[1].get(head.class_id)!).reduce((n, w) => n + Math.max(0, w.free), 0);
        if (free) freeAfter.set(head.class_id, free);
        else settled.add(head.class_id);
      }
    }
    return { out, settled, freeAfter };
  };
  /** The full read's matching: the heads read, and more of the classes where they might not suffice. */
  const matchAsFullRead = async (skipped: ReadonlySet<number>): Promise<Match[]> => {
    for (let round = 0; ; round++) {
      buildLists();
      const { out, settled, freeAfter } = match(skipped);
      const grow = new Map<number, number>();
      for (const c of classIds) {
        if (!options.readAll && settled.has(c)) continue;
        const needed = moreNeeded(c);
        // A few rounds of growing GROWTH times (at most by the free slots its workers had left), then
        // straight to what the full read reads.
        const limit = limitOf.get(c)!;
        if (needed !== undefined) grow.set(c, round < GROW_ROUNDS ? Math.min(needed, limit + Math.max(1, Math.min(freeAfter.get(c) ?? 0, (GROWTH - 1) * limit))) : needed);
      }
      if (!grow.size) return out;
      for (const [c, limit] of grow) limitOf.set(c, limit);
      await read([...grow.keys()]);
    }
  };
  // Match first, then lock only the chosen requests: the heads are more than get assigned (and classes
  // share workers), so locking them all would lock rows for nothing.
  // A chosen request that a concurrent requestWork holds is skipped and the matching runs again.
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
