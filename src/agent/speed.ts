/**
 * The host's speed (docs/reference/host-speed.md): a short CPU benchmark the agent runs once at start,
 * on one core and then on every core at once, whose two scores it reports with its facts (the server
 * makes them `worker:cpu-speed=N` and `worker:cpu-speed-all=N`). The kernel is integer work on a table
 * that stays in the first-level cache, with data-dependent branches, as a compiler's inner loops are;
 * the scores rank hosts, they are not a standard unit. The single-core score is the best of three
 * short rounds; both are rounded to two significant figures (docs/reference/host-speed.md gives how much
 * they vary from one run to the next).
 */
import { Worker } from 'node:worker_threads';

/** The two scores: one core, and every core at once (a tenth of the kernel's units of work per second). */
export interface HostSpeed {
  readonly single: number;
  readonly all: number;
  /** How many threads the all-core score ran. */
  readonly threads: number;
}

/** The benchmark's time in all, in milliseconds, by default: a third for the single-core rounds, the rest for the all-core run. */
export const SPEED_TEST_DEFAULT_MS = 300;
/** The longest time the benchmark may be given. */
export const SPEED_TEST_MAX_MS = 10_000;

/**
 * The kernel, as source, so that the worker threads run the same text as the main thread (and the
 * bundled agent carries no separate file): `rate(ms)` runs units of work for about `ms` milliseconds
 * and returns a tenth of the units done per second.
 */
const KERNEL = `
const table = new Int32Array(4096);
function unit(seed) {
  let x = seed | 0;
  for (let i = 0; i < 4096; i++) {
    x = (Math.imul(x, 1103515245) + 12345) | 0;
    const j = (x >>> 20) & 4095;
    const v = (table[j] + x) | 0;
    table[j] = v;
    if (v & 1) x ^= table[(j + 1) & 4095];
    else x = (x + (v >>> 3)) | 0;
  }
  return x;
}
function rate(ms) {
  let seed = 1, units = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let k = 0; k < 16; k++) seed = unit(seed);
    units += 16;
    now = performance.now();
  }
  globalThis.__tagschedSpeedSink = seed;
  return (units * 100) / (now - start);
}
`;

/** The kernel compiled in this thread, once. */
let localRate: ((ms: number) => number) | null = null;
function kernel(): (ms: number) => number {
  return (localRate ??= new Function(`${KERNEL}; return rate;`)() as (ms: number) => number);
}

/** A score rounded to two significant figures (at least 1). */
export function roundScore(units: number): number {
  if (!Number.isFinite(units) || units <= 1) return 1;
  const digits = Math.floor(Math.log10(units)) + 1;
  const step = 10 ** Math.max(0, digits - 2);
  return Math.max(1, Math.round(units / step) * step);
}

/** Runs the kernel for `ms` in `threads` worker threads started together; the sum of their rates. */
async function allCores(threads: number, ms: number): Promise<number> {
  const source = `
const { parentPort } = require('node:worker_threads');
${KERNEL}
rate(5);
parentPort.postMessage('ready');
parentPort.once('message', (ms) => parentPort.postMessage(rate(ms)));
`;
  const workers = Array.from({ length: threads }, () => new Worker(source, { eval: true }));
  try {
    const ready = workers.map(
      (w) =>
        new Promise<void>((resolve, reject) => {
          w.once('message', () => resolve());
          w.once('error', reject);
        }),
    );
    await Promise.all(ready);
    const rates = workers.map(
      (w) =>
        new Promise<number>((resolve, reject) => {
          w.once('message', (r: number) => resolve(r));
          w.once('error', reject);
        }),
    );
    for (const w of workers) w.postMessage(ms);
    return (await Promise.all(rates)).reduce((a, b) => a + b, 0);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/**
 * Measures the host in about `budgetMs`: three single-core rounds in this thread (the best counts),
 * then one all-core run on `threads` worker threads. The all-core score is at least the single one (a
 * host whose threads were slowed by other load still runs one job as fast as one core).
 */
export async function measureSpeed(options: { budgetMs?: number; threads: number }): Promise<HostSpeed> {
  const budget = Math.min(SPEED_TEST_MAX_MS, Math.max(30, options.budgetMs ?? SPEED_TEST_DEFAULT_MS));
  const threads = Math.max(1, Math.floor(options.threads));
  const rate = kernel();
  rate(5); // compiled before it counts
  let single = 0;
  for (let i = 0; i < 3; i++) single = Math.max(single, rate(budget / 9));
  const all = threads === 1 ? single : await allCores(threads, (budget * 2) / 3);
  return { single: roundScore(single), all: roundScore(Math.max(all, single)), threads };
}
