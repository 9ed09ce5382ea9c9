/**
 * Learned minimums (docs/reference/statistics.md), where the site turns them on
 * (TAGSCHED_LEARNED_REQUIREMENTS): a request whose task, source package and architecture
 * (core/tasks/statistics-key.ts) ran at least {@link LEARNED_MIN_RUNS} times in the statistics' window, on
 * at least {@link LEARNED_MIN_WORKERS} workers, requires a worker with the memory and disk those runs
 * used, with {@link LEARNED_HEADROOM}, in whole GiB: `worker:memory-gib>=N`, `worker:disk-gib>=N`
 * (provenance system, source `history:TASK:PACKAGE:ARCH`). The figure is the 95th percentile of the
 * runs, but never more than the highest figure of the second worker (workers ordered by their highest
 * figure): one worker alone, however many runs it reports, neither makes a minimum nor sets its size.
 * A minimum of {@link LEARNED_FLOOR_GIB} GiB or less is not added. A run killed for memory or that
 * filled its disk counts as having used its worker's size (scheduler/storage/task-statistics.ts), so
 * the next request asks for more than that worker had.
 *
 * Which runs count (a request's own workspace and public ones, or every run where the site shares its
 * history) is the reader's choice: services/workflows/task-analysis.ts.
 */
import { sameStatisticsKey, type StatisticsKey } from './statistics-key.js';
import type { TaskTag } from './types.js';

/** Runs of a key needed before its history makes a minimum. */
export const LEARNED_MIN_RUNS = 3;
/** Distinct workers whose runs of a key are needed before its history makes a minimum. */
export const LEARNED_MIN_WORKERS = 2;
/** The 95th percentile is multiplied by this before rounding up to a whole GiB. */
export const LEARNED_HEADROOM = 1.25;
/** A learned minimum of this many GiB or fewer is not added: trivial tasks get no tag. */
export const LEARNED_FLOOR_GIB = 1;

const GIB = 1024 ** 3;

/** What a minimum is made of, per resource: the runs that reported it and the figure they stand for, in bytes. */
export interface LearnedFigure {
  readonly count: number;
  readonly p95: number;
}

/** The history of one key, as the analysis takes it (built by {@link learnedHistoryOf}). */
export interface LearnedHistory {
  readonly key: StatisticsKey;
  readonly memory: LearnedFigure | null;
  readonly disk: LearnedFigure | null;
}

/** What the aggregates say of one resource of a key: its runs, their 95th percentile, and the highest figure of each worker that reported it (bytes, any order). */
export interface FigureSources {
  readonly count: number;
  readonly p95: number;
  readonly workerMaxima: readonly number[];
}

/**
 * The figure a resource's history stands for, or null: at least {@link LEARNED_MIN_WORKERS} workers
 * reported it, and it is the 95th percentile capped by the second-highest worker's highest figure.
 */
export function learnedFigure(sources: FigureSources | null | undefined): LearnedFigure | null {
  if (!sources || sources.workerMaxima.length < LEARNED_MIN_WORKERS) return null;
  const second = [...sources.workerMaxima].sort((a, b) => b - a)[LEARNED_MIN_WORKERS - 1]!;
  return { count: sources.count, p95: Math.min(sources.p95, second) };
}

/** The history of `key` from what its aggregates say of memory and disk. */
export function learnedHistoryOf(
  key: StatisticsKey,
  figures: { readonly memory: FigureSources | null; readonly disk: FigureSources | null },
): LearnedHistory {
  return { key, memory: learnedFigure(figures.memory), disk: learnedFigure(figures.disk) };
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
