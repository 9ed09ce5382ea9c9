/**
 * The matching of a scheduling pass, in memory (storage/pass.ts reads, locks and writes around it):
 * the free workers, the heads of the queues of the classes they may run, and which head goes to which
 * worker. Heads are matched in queue order (rules/queue-order.ts); each goes to the first free worker
 * of its class in the order of preference for its kind of work (rules/placement-preference.ts,
 * rules/heavy-work.ts) that it is not backed off from (rules/release-backoff.ts).
 *
 * What a pass assigns is defined by the *full read*: per class as many heads as its slots, plus one
 * per backed-off head among them (repeated, BACKOFF_HEAD_ROUNDS times at most: `moreNeeded`), matched
 * in queue order. Classes share workers, so that reads many times more heads than get assigned. The
 * pass reads a few heads per class first and more only where the full read could differ: once a head
 * of a class finds no eligible worker with a free slot, no later head of that class can (free slots
 * only decrease), so the heads it did not read would have got nothing. A class whose unread heads
 * might matter (its page came back full, it never ran out of workers) reads more (`growth`) and the
 * matching runs again; the result is the full read's, with about as many heads as assignments.
 */
import { workerPreference } from '../rules/placement-preference.js';
import { queueBefore, type QueueKey } from '../rules/queue-order.js';
import { isBackedOff, type Backoff } from '../rules/release-backoff.js';

/** Rounds of reading more class heads in place of heads backed off from a worker. */
const BACKOFF_HEAD_ROUNDS = 4;
/** The fewest heads a class reads first (more when there are more free slots per class). */
const FIRST_HEADS_MIN = 4;
/** Rounds in which a class that may need more heads reads as many more as its workers may take, before all it may need. */
const GROW_ROUNDS = 4;
const GROWTH = 4;

/** An available worker with a free slot, as the matching sees it. */
export interface FreeWorker {
  readonly id: number;
  /** Its free slots (rules/active-work.ts); the matching counts them down. */
  free: number;
  /** The classes it may run (rules/fit.ts, through the class cache). */
  readonly eligible: readonly number[];
  readonly pooled: boolean;
  readonly size: readonly [number, number];
  /** Its all-core speed score, 0 when unknown (rules/placement-preference.ts). */
  readonly speed: number;
}

/** The head of a class's queue: its place in the queue order and its class. */
export interface Head extends QueueKey {
  readonly classId: number;
}

/** A request matched with a worker. */
export interface Match {
  readonly workRequestId: number;
  readonly workerId: number;
}

/** One matching of the heads read: what it assigns, the classes whose unread heads cannot change it, and the free slots left after each other class's last head. */
export interface MatchResult {
  readonly out: Match[];
  readonly settled: ReadonlySet<number>;
  readonly freeAfter: ReadonlyMap<number, number>;
}

/** For tests: the first number of heads per class, and whether to read every class as far as the full read does. */
export interface PassOptions {
  firstHeads?: number;
  readAll?: boolean;
}

/** Two lists of heads in queue order merged into one. */
export function mergeHeads<H extends QueueKey>(a: H[], b: H[]): H[] {
  if (!a.length) return b;
  const out: H[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) out.push(queueBefore(b[j], a[i]) ? b[j++] : a[i++]);
  while (i < a.length) out.push(a[i++]);
  while (j < b.length) out.push(b[j++]);
  return out;
}

/** The heads read so far and their matching with the free workers of one pass. */
export class PassMatching {
  /** The classes the free workers may run, in the order first seen. */
  readonly classIds: number[];
  /** Per class, the slots of the workers eligible for it (at most maxAssignments). */
  private readonly slotsPerClass = new Map<number, number>();
  /** Per class, how many heads to have read. */
  private readonly limitOf: Map<number, number>;
  private readonly headsOf = new Map<number, Head[]>();
  private readonly backoffs = new Map<number, Backoff[]>();
  private readonly heavyHead = new Map<number, boolean>();
  private heads: Head[] = [];
  /** Per kind of work ([light, heavy]), per class, its workers in the order of preference for that kind. */
  private readonly byClass = [new Map<number, FreeWorker[]>(), new Map<number, FreeWorker[]>()];
  private readonly ordered: (FreeWorker[] | undefined)[] = [undefined, undefined];
  private readonly initialFree: Map<FreeWorker, number>;

  constructor(
    private readonly workers: readonly FreeWorker[],
    private readonly now: Date,
    private readonly maxAssignments: number,
    private readonly options: PassOptions = {},
  ) {
    for (const w of workers)
      for (const c of w.eligible)
        this.slotsPerClass.set(c, Math.min(maxAssignments, (this.slotsPerClass.get(c) ?? 0) + w.free));
    this.classIds = [...this.slotsPerClass.keys()];
    const totalFree = workers.reduce((n, w) => n + w.free, 0);
    const first = options.firstHeads ?? Math.max(FIRST_HEADS_MIN, Math.ceil(totalFree / this.classIds.length));
    this.limitOf = new Map(this.classIds.map((c) => [c, Math.min(this.slotsPerClass.get(c)!, first)]));
    this.initialFree = new Map(workers.map((w) => [w, w.free]));
  }

  /** What to read next for these classes: per class, how many more heads and how many to skip (those read before). */
  toRead(classes: readonly number[]): { classes: readonly number[]; limits: number[]; skips: number[] } {
    const had = classes.map((c) => this.headsOf.get(c)?.length ?? 0);
    return { classes, limits: classes.map((c, i) => this.limitOf.get(c)! - had[i]), skips: had };
  }

  /**
   * Takes the heads just read for these classes (in queue order), with the backoffs in force of the
   * new ones and whether each is heavy work. A concurrent change of a queue can shift its heads between
   * two reads: a head seen twice is kept once. Returns the heads that were new.
   */
  add(
    classes: readonly number[],
    read: readonly Head[],
    backoffs: ReadonlyMap<number, Backoff[]>,
    isHeavy: (head: Head) => boolean,
  ): Head[] {
    const fresh = read.filter((h) => !this.heavyHead.has(h.id));
    for (const c of classes) if (!this.headsOf.has(c)) this.headsOf.set(c, []);
    for (const h of fresh) this.headsOf.get(h.classId)!.push(h);
    for (const h of fresh) {
      const list = backoffs.get(h.id);
      if (list) this.backoffs.set(h.id, list);
      this.heavyHead.set(h.id, isHeavy(h));
    }
    this.heads = mergeHeads(this.heads, fresh);
    return fresh;
  }

  /** Whether a head was read already (its backoffs need not be read again). */
  has(id: number): boolean {
    return this.heavyHead.has(id);
  }

  /** Whether any head was read at all. */
  get empty(): boolean {
    return this.heads.length === 0;
  }

  /** The matching of the heads read, leaving out the `skipped` requests (held by concurrent callers). */
  match(skipped: ReadonlySet<number>): MatchResult {
    this.buildLists();
    for (const [w, free] of this.initialFree) w.free = free;
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
      const kind = Number(this.heavyHead.get(head.id));
      const list = this.byClass[kind].get(head.classId) ?? [];
      const first = nextFree(list, cursors[kind], head.classId);
      if (!first) settled.add(head.classId); // no eligible worker has a free slot left (whatever the kind)
      const avoid = this.backoffs.get(head.id);
      if (!first || !isBackedOff(avoid, first.id, this.now)) return first;
      return list.slice(cursors[kind].get(head.classId)).find((w) => w.free > 0 && !isBackedOff(avoid, w.id, this.now));
    };
    const out: Match[] = [];
    for (const [i, head] of this.heads.entries()) {
      if (out.length >= this.maxAssignments) {
        for (const h of this.heads.slice(i)) settled.add(h.classId);
        break;
      }
      if (!skipped.has(head.id)) {
        const worker = nextFreeFor(head);
        if (worker) {
          worker.free--;
          out.push({ workRequestId: head.id, workerId: worker.id });
        }
      }
      const ofClass = this.headsOf.get(head.classId)!;
      if (ofClass[ofClass.length - 1] === head && !settled.has(head.classId)) {
        const free = (this.byClass[0].get(head.classId) ?? this.byClass[1].get(head.classId)!).reduce(
          (n, w) => n + Math.max(0, w.free),
          0,
        );
        if (free) freeAfter.set(head.classId, free);
        else settled.add(head.classId);
      }
    }
    return { out, settled, freeAfter };
  }

  /**
   * After the `round`th matching, the classes whose unread heads could change it and how many heads
   * each is to have read now (its limit, raised): a few rounds of growing GROWTH times (at most by the
   * free slots its workers had left), then straight to what the full read reads. Empty: the matching is
   * the full read's.
   */
  growth(round: number, result: MatchResult): number[] {
    const grow = new Map<number, number>();
    for (const c of this.classIds) {
      if (!this.options.readAll && result.settled.has(c)) continue;
      const needed = this.moreNeeded(c);
      const limit = this.limitOf.get(c)!;
      if (needed !== undefined)
        grow.set(
          c,
          round < GROW_ROUNDS
            ? Math.min(needed, limit + Math.max(1, Math.min(result.freeAfter.get(c) ?? 0, (GROWTH - 1) * limit)))
            : needed,
        );
    }
    for (const [c, limit] of grow) this.limitOf.set(c, limit);
    return [...grow.keys()];
  }

  /**
   * The full read's number of heads of a class, when the heads read so far tell it (the class is read
   * to its end, or far enough), else how many it reads at least (more than were read).
   */
  private moreNeeded(c: number): number | undefined {
    const got = this.headsOf.get(c)!;
    if (got.length < this.limitOf.get(c)!) return undefined; // the whole queue of the class
    const slots = this.slotsPerClass.get(c)!;
    const backedOff = (n: number) => got.slice(0, n).filter((h) => this.backoffs.has(h.id)).length;
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
  }

  /**
   * Heaviness is per request (a class can mix tasks), so a class may need both orders of its workers:
   * one list per class and kind of work, each built only when a head of that kind needs it.
   */
  private buildLists(): void {
    for (const heavy of [false, true]) {
      const lists = this.byClass[Number(heavy)];
      const wanted = new Set(
        this.heads.filter((h) => this.heavyHead.get(h.id) === heavy && !lists.has(h.classId)).map((h) => h.classId),
      );
      if (!wanted.size) continue;
      const cmp = workerPreference(heavy);
      const order = (this.ordered[Number(heavy)] ??= [...this.workers].sort((a, b) =>
        cmp({ ...a, eligible: a.eligible.length }, { ...b, eligible: b.eligible.length }),
      ));
      for (const c of wanted) lists.set(c, []);
      for (const w of order) for (const c of w.eligible) if (wanted.has(c)) lists.get(c)!.push(w);
    }
  }
}
