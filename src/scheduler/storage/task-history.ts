import type { EntityManager } from '@mikro-orm/postgresql';
import { taskKey, type TaskHistory } from '../rules/heavy-work.js';

/** How far back run times count, in days (the heaviness of a task, demand's estimates). */
export const HISTORY_DAYS = 30;
/** How long a process keeps the averages before reading them again, in milliseconds (one minute). */
export const HISTORY_REFRESH_MS = 60_000;

/**
 * The average run time of every task over the last {@link HISTORY_DAYS} days, kept per process and
 * read again at most every {@link HISTORY_REFRESH_MS}: one statement over `task_duration`, whose rows
 * are totals per task and day (written as requests complete), so a few rows whatever the history.
 * With the threshold at 0 nothing is read: history then decides nothing.
 */
export class TaskHistoryCache {
  private loaded: { at: number; history: TaskHistory } | null = null;
  private loading: Promise<TaskHistory> | null = null;

  constructor(private readonly thresholdSeconds: number) {}

  /** The averages, read again when older than a minute (concurrent callers share one read). */
  async get(em: EntityManager, now = new Date()): Promise<TaskHistory> {
    if (this.thresholdSeconds <= 0) return { thresholdSeconds: 0, averageSeconds: new Map() };
    if (this.loaded && now.getTime() - this.loaded.at < HISTORY_REFRESH_MS) return this.loaded.history;
    this.loading ??= this.read(em, now).finally(() => (this.loading = null));
    return this.loading;
  }

  /** Drops what is kept: the next get reads the table again (tests that write history). */
  forget(): void {
    this.loaded = null;
  }

  private async read(em: EntityManager, now: Date): Promise<TaskHistory> {
    const rows = await em.execute<{ task_type: string; task_name: string; seconds: number }[]>(
      `select task_type, task_name, (sum(seconds) / sum(runs))::float as seconds from task_duration
        where day > ((now() - make_interval(days => ?)) at time zone 'UTC')::date
        group by task_type, task_name having sum(runs) > 0`,
      [HISTORY_DAYS],
    );
    const history = { thresholdSeconds: this.thresholdSeconds, averageSeconds: new Map(rows.map((r) => [taskKey(r.task_type, r.task_name), r.seconds])) };
    this.loaded = { at: now.getTime(), history };
    return history;
  }
}
