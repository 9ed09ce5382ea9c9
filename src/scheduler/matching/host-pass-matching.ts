/**
 * The pass over the workers that share their resources, in memory (docs/reference/resources.md): each
 * such worker in turn pulls as its own pull would (storage/host-pull.ts), one request after another,
 * until it takes nothing more, with the same window of heads and the same choice (host-choice.ts:
 * chooseOnHost), but over heads read once for all of them (storage/host-pass.ts) instead of a few
 * statements per assignment. What one worker takes or reserves is seen by the workers after it, as it
 * would be in the database. When a worker's window needs heads of a class beyond those read, the
 * matching stops at that worker and says which classes to read further (`needs`); it goes on from there
 * once they are added. Pure: the storage reads the inputs under the workers' row locks and writes what
 * it answers.
 */
import { isBackedOff, type Backoff } from '../rules/release-backoff.js';
import { queueBefore, type QueueKey } from '../rules/queue-order.js';
import type { Resources, RunningWork } from '../rules/resources.js';
import { Heap } from './heap.js';
import { chooseOnHost, type HostCandidate, type ReservationChange, type StoredReservation } from './host-choice.js';

/** Heads of each eligible class in one worker's window: a worker takes one request a pull, but may pass over several that do not fit (storage/host-pull.ts reads as many). */
export const HOST_HEADS_PER_CLASS = 8;
/** Heads in one worker's window, over every class. */
export const HOST_HEADS = 64;

/** A pending request as the pass reads it: its place in the queue, what it reserves and how long its task runs. */
export interface HostHead extends QueueKey<number> {
  readonly classId: number;
  readonly reserved: Resources;
  /** Its task's expected run in seconds; null when its task has no history. */
  readonly expectedSeconds: number | null;
  /** How long it is taken to run once assigned (the default without a history). */
  readonly runSeconds: number;
}

/** A reservation row of a worker, as stored and as the matching leaves it. */
export interface ReservationRow {
  readonly workRequestId: number;
  readonly reservedAt: Date;
  readonly startsAt: Date;
  readonly lapsedAt: Date | null;
}

/** A worker that shares its resources, read under its row lock. */
export interface PassHost {
  readonly id: number;
  readonly offered: Resources;
  /** Requests it may still take by its concurrency. */
  readonly freeSlots: number;
  /** The classes it may run. */
  readonly eligible: readonly number[];
  readonly running: readonly RunningWork[];
  readonly reservation: ReservationRow | null;
}

/** What the pass does with one worker: the requests it assigns, in order, and its reservation after. */
export interface HostPassResult {
  readonly workerId: number;
  readonly take: number[];
  reservation: ReservationRow | null;
  /** Its reservation changed (and must be written). */
  changed: boolean;
}

export interface HostPassInput {
  readonly hosts: readonly PassHost[];
  readonly now: Date;
  readonly maxAssignments: number;
  readonly safetyFactor: number;
  readonly maxSeconds: number;
  /** The requests held by a reservation in force (not lapsed) of any worker, whatever their class: request id → worker id. */
  readonly reservedBy: ReadonlyMap<number, number>;
  /** The pending requests the workers' reservations are for, as heads (those not pending are left out). */
  readonly reservedHeads: readonly HostHead[];
}

/** The matching of one pass over the workers that share their resources. */
export class HostPassMatching {
  private readonly heads = new Map<number, HostHead[]>();
  private readonly complete = new Set<number>();
  private readonly backoffs = new Map<number, readonly Backoff[]>();
  private readonly taken = new Set<number>();
  private readonly reservedBy: Map<number, number>;
  private readonly reservedHeads: Map<number, HostHead>;
  private readonly results: HostPassResult[] = [];
  private readonly running = new Map<number, RunningWork[]>();
  /** Per class, the index of its first head read not taken in this pass (the windows start there). */
  private readonly cursor = new Map<number, number>();
  private next = 0;
  private made = 0;

  constructor(private readonly input: HostPassInput) {
    this.reservedBy = new Map(input.reservedBy);
    this.reservedHeads = new Map(input.reservedHeads.map((h) => [h.id, h]));
    for (const h of input.hosts) {
      this.results.push({ workerId: h.id, take: [], reservation: h.reservation, changed: false });
      this.running.set(h.id, [...h.running]);
    }
  }

  /** Heads to read first per class: a window's worth and one for each free slot of the workers that may run it, at most `cap`. */
  initialReads(cap: number): Map<number, number> {
    const out = new Map<number, number>();
    for (const h of this.input.hosts)
      for (const c of h.eligible)
        out.set(c, Math.min(cap, (out.get(c) ?? HOST_HEADS_PER_CLASS) + Math.max(0, h.freeSlots)));
    return out;
  }

  /** How many heads of the class are read so far. */
  readCount(classId: number): number {
    return this.heads.get(classId)?.length ?? 0;
  }

  /**
   * Adds heads of a class, in queue order after those added before, with their backoffs; `complete`
   * when the read returned fewer than it asked for (the class has no more pending requests).
   */
  addHeads(
    classId: number,
    heads: readonly HostHead[],
    backoffs: ReadonlyMap<number, readonly Backoff[]>,
    complete: boolean,
  ) {
    const list = this.heads.get(classId) ?? [];
    list.push(...heads);
    this.heads.set(classId, list);
    for (const [id, b] of backoffs) this.backoffs.set(id, b);
    if (complete) this.complete.add(classId);
  }

  /**
   * Runs the workers from where it stopped. Returns the classes whose heads it needs beyond those read
   * to go on (then add them and run again), or an empty list when every worker is done.
   */
  run(): number[] {
    const { hosts, maxAssignments } = this.input;
    for (; this.next < hosts.length; this.next++) {
      const host = hosts[this.next];
      const result = this.results[this.next];
      // The worker's window, kept from one of its pulls to the next (a pull changes it by what it took).
      let window: HostWindow | null = null;
      while (result.take.length < host.freeSlots && this.made < maxAssignments) {
        window ??= this.openWindow(host);
        const needs = window.fill();
        if (needs.length) return needs;
        const took = this.pull(host, result, this.withHeld(window.candidates, result));
        if (took === null) break;
        window.remove(took);
      }
    }
    return [];
  }

  /** What each worker takes and its reservation, in the workers' order. */
  get answer(): readonly HostPassResult[] {
    return this.results;
  }

  /** The window of `host` over the heads read, after what the workers before it took. */
  private openWindow(host: PassHost): HostWindow {
    const { now } = this.input;
    const lists = host.eligible.map((c) => {
      const list = this.heads.get(c) ?? [];
      // Requests taken in this pass stay taken: the class's cursor moves past those at its front for good.
      let start = this.cursor.get(c) ?? 0;
      while (start < list.length && this.taken.has(list[start].id)) start++;
      this.cursor.set(c, start);
      return { classId: c, list, start, complete: this.complete.has(c) };
    });
    return new HostWindow(lists, (h) => this.taken.has(h.id) || isBackedOff(this.backoffs.get(h.id), host.id, now));
  }

  /** The window's candidates with the request the worker is held for in its place in the queue, when it is not among them. */
  private withHeld(candidates: readonly HostHead[], result: HostPassResult): HostHead[] {
    const held = result.reservation;
    const heldHead = held && !held.lapsedAt ? this.pendingReserved(held.workRequestId) : undefined;
    const out = [...candidates];
    if (heldHead && !out.some((h) => h.id === heldHead.id)) {
      out.push(heldHead);
      out.sort((x, y) => (queueBefore(x, y) ? -1 : 1));
    }
    return out;
  }

  /** The request `id` as a head while it is pending and not taken in this pass; undefined otherwise. */
  private pendingReserved(id: number): HostHead | undefined {
    if (this.taken.has(id)) return undefined;
    return this.reservedHeads.get(id);
  }

  /** One pull of `host`: the choice, its reservation change, and the request it takes (null: none). */
  private pull(host: PassHost, result: HostPassResult, candidates: HostHead[]): HostHead | null {
    const { now } = this.input;
    const running = this.running.get(host.id)!;
    const row = result.reservation;
    const stored: StoredReservation | null = row
      ? {
          workRequestId: row.workRequestId,
          reservedAt: row.reservedAt,
          lapsed: row.lapsedAt !== null,
          request: this.pendingReserved(row.workRequestId)?.reserved ?? null,
        }
      : null;
    const choice = chooseOnHost({
      offered: host.offered,
      running,
      reservation: stored,
      candidates: candidates.map((h): HostCandidate => ({
        id: h.id,
        reserved: h.reserved,
        expectedSeconds: h.expectedSeconds,
        reservedElsewhere: (this.reservedBy.get(h.id) ?? host.id) !== host.id,
      })),
      now,
      safetyFactor: this.input.safetyFactor,
      maxSeconds: this.input.maxSeconds,
    });
    this.apply(host.id, result, choice.reservation, candidates);
    const [pick] = choice.take;
    if (pick === undefined) return null;
    const head = candidates.find((h) => h.id === pick)!;
    this.taken.add(pick);
    this.made++;
    result.take.push(pick);
    running.push({ reserved: head.reserved, expectedEndAt: new Date(now.getTime() + head.runSeconds * 1000) });
    // The request it was held for starts here: the worker is held for nothing now.
    if (row && row.workRequestId === pick) this.set(host.id, result, null);
    return head;
  }

  /** Applies a reservation change as storage/host-pull.ts writes it. */
  private apply(workerId: number, result: HostPassResult, change: ReservationChange, candidates: HostHead[]): void {
    const row = result.reservation;
    const { now } = this.input;
    if (change.kind === 'clear') this.set(workerId, result, null);
    else if (change.kind === 'lapse') {
      if (row && !row.lapsedAt) this.set(workerId, result, { ...row, lapsedAt: now });
    } else if (change.kind === 'keep') {
      if (change.startsAt && row && !row.lapsedAt) this.set(workerId, result, { ...row, startsAt: change.startsAt });
    } else {
      this.set(workerId, result, null);
      // Another worker holds that request already: then this one holds nothing.
      if (this.reservedBy.has(change.workRequestId)) return;
      const head = candidates.find((h) => h.id === change.workRequestId);
      if (head) this.reservedHeads.set(head.id, head);
      this.set(workerId, result, {
        workRequestId: change.workRequestId,
        reservedAt: now,
        startsAt: change.startsAt,
        lapsedAt: null,
      });
    }
  }

  private set(workerId: number, result: HostPassResult, row: ReservationRow | null): void {
    const old = result.reservation;
    if (old && !old.lapsedAt && this.reservedBy.get(old.workRequestId) === workerId)
      this.reservedBy.delete(old.workRequestId);
    if (row && !row.lapsedAt) this.reservedBy.set(row.workRequestId, workerId);
    result.reservation = row;
    result.changed = true;
  }
}

/** One class of a worker's window: its heads read in queue order, from `start` on (those before are taken). */
interface WindowClass {
  readonly classId: number;
  readonly list: readonly HostHead[];
  readonly start: number;
  /** Every pending request of the class is read. */
  readonly complete: boolean;
}

/**
 * An entry of a window's merge: the next head `i` of class `k` that the worker may take, or, with `i`
 * -1, the end of what is read of a class that has more: it stands just after the class's last head
 * read (before everything when none is), and reaching it means the class must be read further.
 */
interface MergeEntry {
  readonly k: number;
  readonly i: number;
}

/**
 * One worker's window as host-pull.ts reads it: the first {@link HOST_HEADS} in queue order of the first
 * {@link HOST_HEADS_PER_CLASS} of each eligible class that the worker may take (`skip` says which it may
 * not: taken, or backed off from it), merged class by class (a heap of each class's next head). Between
 * the worker's pulls the window changes only by what it took (`remove`), so it is kept and refilled.
 */
class HostWindow {
  readonly candidates: HostHead[] = [];
  private readonly counts: number[];
  /** Per class, the index of the next head not yet looked at. */
  private readonly pos: number[];
  private readonly heap: Heap<MergeEntry>;
  private readonly classOf = new Map<number, number>();

  constructor(
    private readonly classes: readonly WindowClass[],
    private readonly skip: (h: HostHead) => boolean,
  ) {
    this.counts = classes.map(() => 0);
    this.pos = classes.map((c) => c.start);
    classes.forEach((c, k) => this.classOf.set(c.classId, k));
    const first: MergeEntry[] = [];
    classes.forEach((_, k) => {
      const e = this.next(k);
      if (e) first.push(e);
    });
    this.heap = new Heap<MergeEntry>((x, y) => this.entryBefore(x, y), first);
  }

  /**
   * Fills the window up to {@link HOST_HEADS}; returns the classes to read further when the merge reached
   * the end of what is read of one (the window is not known then), else an empty list.
   */
  fill(): number[] {
    while (this.candidates.length < HOST_HEADS && this.heap.size) {
      const top = this.heap.pop()!;
      if (top.i < 0) return this.unreadClasses(top.k);
      const head = this.classes[top.k].list[top.i];
      this.insert(head);
      if (++this.counts[top.k] < HOST_HEADS_PER_CLASS) this.advance(top.k);
    }
    return [];
  }

  /** Takes `head` out of the window (the worker took it); its class may then offer its next head. */
  remove(head: HostHead): void {
    const at = this.candidates.indexOf(head);
    if (at < 0) return; // the request it was held for, not among the window's heads
    this.candidates.splice(at, 1);
    const k = this.classOf.get(head.classId)!;
    if (this.counts[k]-- === HOST_HEADS_PER_CLASS) this.advance(k);
  }

  /** Pushes the next head of class `k` the worker may take, or the end of what is read of it when it has more. */
  private advance(k: number): void {
    const e = this.next(k);
    if (e) this.heap.push(e);
  }

  /** The next entry of class `k`: its next head the worker may take, the end of what is read of it, or none (it has no more). */
  private next(k: number): MergeEntry | null {
    const c = this.classes[k];
    let i = this.pos[k];
    while (i < c.list.length && this.skip(c.list[i])) i++;
    this.pos[k] = i < c.list.length ? i + 1 : i;
    if (i < c.list.length) return { k, i };
    return c.complete ? null : { k, i: -1 };
  }

  /** The class `k` and every other class whose end of what is read waits in the merge. */
  private unreadClasses(k: number): number[] {
    const out = new Set([this.classes[k].classId]);
    for (let e = this.heap.pop(); e; e = this.heap.pop()) if (e.i < 0) out.add(this.classes[e.k].classId);
    return [...out];
  }

  private insert(head: HostHead): void {
    let at = this.candidates.length;
    while (at > 0 && queueBefore(head, this.candidates[at - 1])) at--;
    this.candidates.splice(at, 0, head);
  }

  /** The head an entry stands at: its head, or for the end of a class its last head read (undefined when none is). */
  private keyOf(e: MergeEntry): HostHead | undefined {
    const list = this.classes[e.k].list;
    return e.i >= 0 ? list[e.i] : list[list.length - 1];
  }

  private entryBefore(x: MergeEntry, y: MergeEntry): boolean {
    const a = this.keyOf(x);
    const b = this.keyOf(y);
    // The end of a class with nothing read comes first; the end of a class comes just after its last head.
    if (!a) return true;
    if (!b) return false;
    if (a === b) return x.i >= 0;
    return queueBefore(a, b);
  }
}
