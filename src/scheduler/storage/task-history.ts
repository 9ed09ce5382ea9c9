import type { EntityManager } from '@mikro-orm/postgresql';
import { DEFAULT_TASK_SECONDS } from '../matching/demand-plan.js';
import { taskKey, type TaskHistory } from '../rules/heavy-work.js';
import { readTaskTotals, STATISTICS_WINDOW_DAYS, type TaskStatisticsSummary } from './task-statistics.js';

/** How far back run times count, in days (the heaviness of a task, demand's estimates): the statistics' window. */
export const HISTORY_DAYS = STATISTICS_WINDOW_DAYS;
/** How long a process keeps the averages before reading them again, in milliseconds (one minute). */
export const HISTORY_REFRESH_MS = 60_000;

/**
 * The average run time of every task over the last {@link HISTORY_DAYS} days, and its median reported
 * run (task statistics: {@link expectedDurationSeconds}), kept per process and read again at most every
 * {@link HISTORY_REFRESH_MS}: two statements over daily rows (`task_duration`, written as requests
 * complete, and the run-time histograms), so a few rows per task whatever the history.
 * It is read whatever the threshold: with the threshold at 0 it calls no work heavy (rules/heavy-work.ts),
 * and start estimates still read the expected durations from it.
 */
export class TaskHistoryCache {
  private loaded: { at: number; history: TaskHistory } | null = null;
  private loading: Promise<TaskHistory> | null = null;

  constructor(private readonly thresholdSeconds: number) {}

  /** The averages, read again when older than a minute (concurrent callers share one read). */
  async get(em: EntityManager, now = new Date()): Promise<TaskHistory> {
    if (this.loaded && now.getTime() - this.loaded.at < HISTORY_REFRESH_MS) return this.loaded.history;
    this.loading ??= this.read(em, now).finally(() => (this.loading = null));
    return this.loading;
  }

  /** Drops what is kept: the next get reads the table again (tests that write history). */
  forget(): void {
    this.loaded = null;
  }

  private async read(em: EntityManager, now: Date): Promise<TaskHistory> {
    const { medianSeconds, averageSeconds } = await readDurationHistory(em);
    const history = { thresholdSeconds: this.thresholdSeconds, averageSeconds, medianSeconds };
    this.loaded = { at: now.getTime(), history };
    return history;
  }
}

/** The run time a task is expected to take when it has no history, in seconds: demand's assumption (ten minutes), one number for both. */
export const DEFAULT_EXPECTED_SECONDS = DEFAULT_TASK_SECONDS;

/**
 * What the expected duration of a task is read from, by {@link taskKey}: the median run time its agents
 * reported (scheduler/storage/task-statistics.ts), and the average wall time from start to completion
 * (`task_duration`) for tasks whose runs reported no statistics. A {@link TaskHistory} is one.
 */
export interface DurationHistory {
  readonly medianSeconds?: ReadonlyMap<string, number>;
  readonly averageSeconds: ReadonlyMap<string, number>;
}

/**
 * The one answer to "how long does a run of this task take", in seconds: the median of its reported run
 * times over the last {@link HISTORY_DAYS} days (an estimate at most 5% above it), else the average of its
 * recorded durations, else {@link DEFAULT_EXPECTED_SECONDS}. Per task; not per source package.
 */
export function expectedDurationSeconds(history: DurationHistory, taskType: string, taskName: string): number {
  const key = taskKey(taskType, taskName);
  return history.medianSeconds?.get(key) ?? history.averageSeconds.get(key) ?? DEFAULT_EXPECTED_SECONDS;
}

/** {@link expectedDurationSeconds} when the task has a history; null when it has none (a backfill then does not count on it ending). */
export function knownDurationSeconds(history: DurationHistory, taskType: string, taskName: string): number | null {
  const key = taskKey(taskType, taskName);
  return history.medianSeconds?.get(key) ?? history.averageSeconds.get(key) ?? null;
}

/** Reads a {@link DurationHistory} and the tasks it knows: two statements over the daily rows, a few per task whatever the history. */
export async function readDurationHistory(
  em: EntityManager,
): Promise<DurationHistory & { tasks: { taskType: string; taskName: string }[] }> {
  const [totals, averages] = await Promise.all([
    readTaskTotals(em, HISTORY_DAYS, 'duration'),
    em.execute<{ task_type: string; task_name: string; seconds: number }[]>(
      `select task_type, task_name, (sum(seconds) / sum(runs))::float as seconds from task_duration
        where day > ((now() - make_interval(days => ?)) at time zone 'UTC')::date
        group by task_type, task_name having sum(runs) > 0`,
      [HISTORY_DAYS],
    ),
  ]);
  const tasks = new Map<string, { taskType: string; taskName: string }>();
  for (const t of totals)
    tasks.set(taskKey(t.key.taskType, t.key.taskName), { taskType: t.key.taskType, taskName: t.key.taskName });
  for (const r of averages)
    tasks.set(taskKey(r.task_type, r.task_name), { taskType: r.task_type, taskName: r.task_name });
  return {
    tasks: [...tasks.values()],
    medianSeconds: medians(totals),
    averageSeconds: new Map(averages.map((r) => [taskKey(r.task_type, r.task_name), r.seconds])),
  };
}

/** The median run time of each task as a whole, by {@link taskKey}. */
function medians(totals: readonly TaskStatisticsSummary[]): Map<string, number> {
  return new Map(
    totals.flatMap((t) => (t.duration ? [[taskKey(t.key.taskType, t.key.taskName), t.duration.median] as const] : [])),
  );
}
