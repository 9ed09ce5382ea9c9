/**
 * Whether a work request is heavy work (docs/design.md: placement quality), and why: the one home of the rule, used by the
 * pass, the placement of a new request and the diagnosis. Heavy work goes to the largest free worker
 * that fits; other work to the smallest, so that large workers stay free for heavy work.
 */

/** The tag a request requires to be heavy work by its size class. */
export const HEAVY_TAG = 'worker:class:large';

/** Why a request is heavy work, as data. */
export const HEAVY_REASONS = {
  /** It requires `worker:class:large` (its size class, often from a task rule). */
  REQUIRES_LARGE: 'REQUIRES_LARGE',
  /** Its task's average run over the last 30 days is at least TAGSCHED_HEAVY_TASK_SECONDS. */
  HISTORY: 'HISTORY',
} as const;
export type HeavyReason = (typeof HEAVY_REASONS)[keyof typeof HEAVY_REASONS];

/** The average run times of tasks as the rule reads them (task-history.ts keeps them). */
export interface TaskHistory {
  /** From this average on, a task is heavy work, in seconds; 0: history never makes work heavy. */
  readonly thresholdSeconds: number;
  /** Average seconds per run over the last 30 days, by {@link taskKey}; tasks without runs are absent. */
  readonly averageSeconds: ReadonlyMap<string, number>;
  /** The median reported run over the last 30 days, by {@link taskKey} (storage/task-history.ts: the expected duration; not the heaviness). */
  readonly medianSeconds?: ReadonlyMap<string, number>;
}

/** A history with nothing in it: only the size class decides. */
export const NO_HISTORY: TaskHistory = { thresholdSeconds: 0, averageSeconds: new Map() };

/** The key of a task in a {@link TaskHistory}. */
export const taskKey = (taskType: string, taskName: string) => `${taskType}/${taskName}`;

/** Whether a request is heavy work, why, and its task's average run (null without history). */
export interface Heaviness {
  readonly heavy: boolean;
  readonly reason: HeavyReason | null;
  readonly averageSeconds: number | null;
}

/**
 * Whether a request is heavy work: it requires `worker:class:large` (its size class), or else its
 * task's average run over the last 30 days reaches the threshold (its history). Without history
 * only the size class decides.
 */
export function heaviness(
  requiredTags: readonly string[],
  taskType: string,
  taskName: string,
  history: TaskHistory,
): Heaviness {
  const averageSeconds = history.averageSeconds.get(taskKey(taskType, taskName)) ?? null;
  if (requiredTags.includes(HEAVY_TAG)) return { heavy: true, reason: HEAVY_REASONS.REQUIRES_LARGE, averageSeconds };
  if (history.thresholdSeconds > 0 && averageSeconds !== null && averageSeconds >= history.thresholdSeconds) {
    return { heavy: true, reason: HEAVY_REASONS.HISTORY, averageSeconds };
  }
  return { heavy: false, reason: null, averageSeconds };
}

/** Whether any task is heavy work by its history now (else only size classes make work heavy). */
export function anyHeavyByHistory(history: TaskHistory): boolean {
  if (history.thresholdSeconds <= 0) return false;
  for (const seconds of history.averageSeconds.values()) if (seconds >= history.thresholdSeconds) return true;
  return false;
}
