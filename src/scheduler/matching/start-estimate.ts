/**
 * When a pending request is expected to start (docs/reference/scheduling.md, "When will it start: start estimates"), as a
 * pure simulation: the requests ahead of it in its class's queue, then itself, each take the slot that
 * frees first (a worker of concurrency 2 has two slots) and hold it for their task's expected run; the
 * estimate is when the slot it takes frees. Slots are those of the available matching workers (free
 * now, or when their active work is expected to end), of matching workers still launching (when their
 * pool's launch time has passed since the launch) and of the workers the matching pools with room
 * could launch (their launch time from now). Storage reads the inputs (storage/start-estimate.ts).
 */
import { Heap } from './heap.js';

/** How many of the requests ahead are simulated one by one; beyond, the rest is extrapolated at their mean run over all the slots. */
export const SIMULATED_AHEAD = 1000;
/** A pool's launch time when none of its launches was measured yet, in seconds (five minutes). */
export const DEFAULT_LAUNCH_SECONDS = 300;

/** An available matching worker: its slots, and when each piece of its active work is expected to end. */
export interface EstimateWorker {
  readonly concurrency: number;
  /** Per request it holds (ASSIGNED or RUNNING): its start (or assignment) plus its task's expected run. */
  readonly busyUntil: readonly Date[];
}

/** A matching worker whose instance is still launching: its slots free when its pool's launch time has passed since the launch. */
export interface EstimateLaunching {
  readonly since: Date;
  readonly launchSeconds: number;
  readonly concurrency: number;
}

/** A matching pool that may launch workers now (rules/pool-capacity.ts: launchable > 0). */
export interface EstimatePool {
  readonly name: string;
  /** Its measured launch time (worker_pool.launch_seconds); null: {@link DEFAULT_LAUNCH_SECONDS}. */
  readonly launchSeconds: number | null;
  readonly concurrency: number;
  /** How many more instances it may launch now. */
  readonly launchable: number;
}

export interface StartEstimateInput {
  readonly now: Date;
  readonly workers: readonly EstimateWorker[];
  readonly launching: readonly EstimateLaunching[];
  readonly pools: readonly EstimatePool[];
  /** How many requests of its class are ahead of it (queue-position.ts). */
  readonly ahead: number;
  /** The expected runs of the first of them, in queue order, in seconds (at most {@link SIMULATED_AHEAD} are read). */
  readonly aheadSeconds: readonly number[];
}

/** The simulated start: null `at` when no slot could ever take it now, with the reason in `basis`. */
export interface SimulatedStart {
  readonly at: Date | null;
  readonly waitSeconds: number | null;
  /** How it was computed (or why there is none), in words. */
  readonly basis: string;
  /** Whether the requests ahead beyond the first {@link SIMULATED_AHEAD} were extrapolated rather than simulated. */
  readonly extrapolated: boolean;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * Simulates the queue of a pending request's class up to it and returns when it is expected to start.
 * Only the `need` earliest slots can ever be taken by `need` requests (a slot is first taken when it is
 * the earliest of those not taken yet), so at most that many are put in play: bounded by
 * {@link SIMULATED_AHEAD} + 1 whatever the number of workers.
 */
export function simulateStart(input: StartEstimateInput): SimulatedStart {
  const now = input.now.getTime();
  const simulated = Math.min(input.ahead, input.aheadSeconds.length, SIMULATED_AHEAD);
  const need = simulated + 1;
  const initial: number[] = [];
  let totalSlots = 0;
  const add = (at: number, count: number) => {
    totalSlots += count;
    for (let i = 0; i < Math.min(count, need); i++) initial.push(Math.max(now, at));
  };
  let workerSlots = 0;
  for (const w of input.workers) {
    const busy = w.busyUntil.slice(0, w.concurrency);
    for (const t of busy) add(t.getTime(), 1);
    add(now, Math.max(0, w.concurrency - busy.length));
    workerSlots += Math.max(w.concurrency, busy.length);
  }
  let launchingSlots = 0;
  for (const l of input.launching) {
    add(l.since.getTime() + l.launchSeconds * 1000, l.concurrency);
    launchingSlots += l.concurrency;
  }
  const poolParts: string[] = [];
  for (const p of input.pools) {
    if (p.launchable <= 0) continue;
    const launchSeconds = p.launchSeconds ?? DEFAULT_LAUNCH_SECONDS;
    const concurrency = Math.max(1, p.concurrency);
    const instances = Math.min(p.launchable, Math.ceil(need / concurrency));
    for (let i = 0; i < instances; i++) add(now + launchSeconds * 1000, concurrency);
    totalSlots += (p.launchable - instances) * concurrency;
    poolParts.push(
      `up to ${plural(p.launchable, 'new worker')} of pool ${p.name} after a launch of ${Math.round(launchSeconds)} s${p.launchSeconds === null ? ' (default: none measured yet)' : ''}`,
    );
  }
  if (!initial.length) {
    return {
      at: null,
      waitSeconds: null,
      basis: 'no matching worker is available or launching, and no matching pool may launch one now',
      extrapolated: false,
    };
  }
  initial.sort((a, b) => a - b);
  const heap = new Heap<number>((x, y) => x < y); // slot free times in ms
  for (const t of initial.slice(0, need)) heap.push(t);
  for (let i = 0; i < simulated; i++) heap.push(heap.pop()! + input.aheadSeconds[i] * 1000);
  let start = heap.pop()!;
  const parts = [`${plural(simulated, 'request')} ahead simulated`];
  const slotParts: string[] = [];
  if (workerSlots)
    slotParts.push(`${plural(workerSlots, 'slot')} of ${plural(input.workers.length, 'available matching worker')}`);
  if (launchingSlots)
    slotParts.push(`${plural(launchingSlots, 'slot')} of ${plural(input.launching.length, 'launching worker')}`);
  slotParts.push(...poolParts);
  parts[0] += ` on ${slotParts.join(', ')}`;
  const rest = input.ahead - simulated;
  if (rest > 0) {
    const mean = simulated ? input.aheadSeconds.slice(0, simulated).reduce((s, x) => s + x, 0) / simulated : 0;
    start += (rest * mean * 1000) / totalSlots;
    parts.push(
      `${rest} more ahead extrapolated at their mean run of ${Math.round(mean)} s over ${plural(totalSlots, 'slot')}`,
    );
  }
  return { at: new Date(start), waitSeconds: (start - now) / 1000, basis: parts.join('; '), extrapolated: rest > 0 };
}

/** A pending request's start estimate, as the diagnosis gives it: the simulation, and how far off the estimates of its class were. */
export interface StartEstimate extends SimulatedStart {
  /** The median of the absolute errors (|started − estimated|) of the last estimates of its class, in seconds; null before any. */
  readonly medianAbsoluteErrorSeconds: number | null;
  /** How many errors that median is of (at most 100, the newest). */
  readonly samples: number;
}

/** The median of some numbers; null for none. */
export function medianOf(values: readonly number[]): number | null {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
