/**
 * Learned minimums (docs/reference/statistics.md), where the site turns them on
 * (TAGSCHED_LEARNED_REQUIREMENTS): a request whose task, source package and architecture
 * (tasks/statistics-key.ts) ran at least {@link LEARNED_MIN_RUNS} times in the statistics' window
 * requires a worker with the memory and disk the 95th percentile of those runs used, with
 * {@link LEARNED_HEADROOM}, in whole GiB: `worker:memory-gib>=N`, `worker:disk-gib>=N` (provenance
 * system, source `history:TASK:PACKAGE:ARCH`). A minimum of {@link LEARNED_FLOOR_GIB} GiB or less is
 * not added. A run killed for memory or that filled its disk counts as having used at least its worker's
 * size (scheduler/storage/task-statistics.ts), so the next request asks for more than that worker had.
 */
import { sameStatisticsKey, type StatisticsKey } from './statistics-key.js';
import type { TaskTag } from './types.js';

/** Runs of a key needed before its history makes a minimum. */
export const LEARNED_MIN_RUNS = 3;
/** The 95th percentile is multiplied by this before rounding up to a whole GiB. */
export const LEARNED_HEADROOM = 1.25;
/** A learned minimum of this many GiB or fewer is not added: trivial tasks get no tag. */
export const LEARNED_FLOOR_GIB = 1;

const GIB = 1024 ** 3;

/** The history of one key, as the analysis takes it: per resource, the runs that reported it and their 95th percentile, in bytes. */
export interface LearnedHistory {
  readonly key: StatisticsKey;
  readonly memory: { readonly count: number; readonly p95: number } | null;
  readonly disk: { readonly count: number; readonly p95: number } | null;
}

/** The source of a learned tag: `history:TASK:PACKAGE:ARCH`. */
export const learnedSource = (key: StatisticsKey) => `history:${key.taskName}:${key.package}:${key.architecture}`;

/** The minimum, in whole GiB, that `p95` bytes with headroom make; null under the floor. */
export function learnedGib(p95: number): number | null {
  const gib = Math.ceil((p95 * LEARNED_HEADROOM) / GIB);
  return Number.isFinite(gib) && gib > LEARNED_FLOOR_GIB ? gib : null;
}

/** The required tags `history` makes for a request of `key`; none when it is another key's or too short. */
export function learnedRequiredTags(key: StatisticsKey, history: LearnedHistory | null | undefined): TaskTag[] {
  if (!history || !sameStatisticsKey(key, history.key)) return [];
  const source = learnedSource(key);
  const tags: TaskTag[] = [];
  for (const [name, figure] of [
    ['worker:memory-gib', history.memory],
    ['worker:disk-gib', history.disk],
  ] as const) {
    if (!figure || figure.count < LEARNED_MIN_RUNS) continue;
    const gib = learnedGib(figure.p95);
    if (gib !== null) tags.push({ tag: `${name}>=${gib}`, source });
  }
  return tags;
}
