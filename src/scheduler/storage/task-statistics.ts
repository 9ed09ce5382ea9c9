/**
 * The aggregates of task statistics (docs/reference/statistics.md): per task, and per task, source package
 * and architecture (tasks/statistics-key.ts), daily histograms of run time, peak memory and peak disk,
 * written in the statement that keeps a run's figures (services/work/run-statistics.ts) and read as
 * count, median and 95th percentile over a window of days. Nothing scans the runs themselves.
 *
 * Buckets are logarithmic, {@link BUCKET_RATIO} wide: value v (milliseconds of run time, bytes of memory
 * or disk; below 1 counts as 1) falls in bucket floor(ln v / ln 1.05). An estimate is the upper bound of
 * its bucket, 1.05^(bucket + 1): never below the nearest-rank percentile of the values, and less than 5%
 * above it. Size: one row per key, metric, day and bucket used; at most two keys per run, so at most six
 * rows per run completed in the window, and at most 2 × 3 × 711 buckets (up to 1 PiB) per task,
 * package, architecture and day. Rows older than the window are deleted by the hourly housekeeping.
 */
import { valuedTagRegex } from '../../tags/syntax.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray } from '../../db/arrays.js';
import type { StatisticsKey } from '../../tasks/statistics-key.js';
import { RUN_STATISTICS_LIMITS } from '../../shared/run-statistics.js';

/** How many days the aggregates cover, and how long their rows are kept. */
export const STATISTICS_WINDOW_DAYS = 30;
/** The width of a bucket: each holds values up to 5% apart. */
export const BUCKET_RATIO = 1.05;
/** The metrics kept: run time (`runSeconds`, in milliseconds), peak memory and peak disk (bytes). */
export const STATISTICS_METRICS = ['duration', 'memory', 'disk'] as const;
export type StatisticsMetric = (typeof STATISTICS_METRICS)[number];

/** The bucket of a value, in SQL: the one definition the writers and the tests use. */
export const bucketSql = (value: string) => `floor(ln(greatest(${value}, 1)::float8) / ln(${BUCKET_RATIO}))::int`;

/** The estimate a bucket stands for: its upper bound (milliseconds or bytes). */
export const bucketValue = (bucket: number): number => BUCKET_RATIO ** (bucket + 1);

/** The window as a condition on `day`, with its one parameter (the days). */
const inWindowSql = (column: string) => `${column} > ((now() - make_interval(days => ?)) at time zone 'UTC')::date`;

/** A valued tag of the worker `workerId` (`worker:memory-gib=N`), as bytes, in SQL; null without one. */
const workerGibBytesSql = (name: string, workerId: string) =>
  `(select max(substring(t from '${valuedTagRegex(name)}')::float8) * ${1024 ** 3}
      from worker w cross join unnest(w.provided_tags) t
     where w.id = ${workerId} and t ~ '${valuedTagRegex(name)}')`;

/**
 * A CTE named `histograms` that counts the run of `source` (a relation with run_seconds,
 * peak_memory_bytes, peak_disk_bytes, out_of_memory, disk_full, memory_limit_bytes, worker_id; at most one row) in the
 * histograms of today for its task and for its task, package and architecture. A run killed for memory
 * (or that filled its disk) counts as having used at least its worker's `worker:memory-gib`
 * (`worker:disk-gib`), or the memory limit its agent applied when that is lower (least() skips a null),
 * so that learned minimums ask for more next time; no figure counts as more than
 * RUN_STATISTICS_LIMITS.maxBytes (what a worker says of its size is not bounded otherwise). `insert … on conflict do update`
 * keeps concurrent completions exact. Its parameters: {@link histogramParams}.
 */
export const histogramsCteSql = (source: string) => `
  histograms as (
    insert into task_statistics_histogram (task_type, task_name, package, architecture, day, metric, bucket, count)
    select distinct ?::text, ?::text, k.package, k.architecture, (now() at time zone 'UTC')::date, m.metric, ${bucketSql('m.value')}, 1
      from ${source} s
      cross join (values ('', ''), (?::text, ?::text)) as k(package, architecture)
      cross join lateral (values
        ('duration', s.run_seconds * 1000),
        ('memory', least(case when s.out_of_memory then greatest(s.peak_memory_bytes::float8, least(s.memory_limit_bytes::float8, ${workerGibBytesSql('worker:memory-gib', 's.worker_id')})) else s.peak_memory_bytes::float8 end, ${RUN_STATISTICS_LIMITS.maxBytes})),
        ('disk', least(case when s.disk_full then greatest(s.peak_disk_bytes::float8, ${workerGibBytesSql('worker:disk-gib', 's.worker_id')}) else s.peak_disk_bytes::float8 end, ${RUN_STATISTICS_LIMITS.maxBytes}))
      ) as m(metric, value)
     where m.value is not null
    on conflict (task_type, task_name, package, architecture, metric, day, bucket) do update set count = task_statistics_histogram.count + 1
  )`;
export const histogramParams = (key: StatisticsKey): string[] => [key.taskType, key.taskName, key.package, key.architecture];

/** Count, median and 95th percentile of one metric (seconds for duration, bytes otherwise). */
export interface MetricSummary {
  readonly count: number;
  readonly median: number;
  readonly p95: number;
}

/** The aggregates of one key over the window; a metric without runs is null. */
export interface TaskStatisticsSummary {
  readonly key: StatisticsKey;
  readonly days: number;
  readonly duration: MetricSummary | null;
  readonly memory: MetricSummary | null;
  readonly disk: MetricSummary | null;
}

/** `package` and `architecture` '' is the key of the task as a whole. */
export const keyString = (k: StatisticsKey) => JSON.stringify([k.taskType, k.taskName, k.package, k.architecture]);

type SummaryRow = { task_type: string; task_name: string; package: string; architecture: string; metric: StatisticsMetric; runs: string | number; median: number; p95: number };

/**
 * The percentiles of each (key, metric) over the window, nearest rank: the first bucket whose
 * cumulative count reaches ceil(p × count). `keys` filters (null: every key with package and
 * architecture ''), in one statement.
 */
const SUMMARY_SQL = (filter: string) => `
  with h as (
    select task_type, task_name, package, architecture, metric, bucket, sum(count)::bigint as n
      from task_statistics_histogram
     where ${inWindowSql('day')} and ${filter}
     group by task_type, task_name, package, architecture, metric, bucket
  ), c as (
    select *, sum(n) over (partition by task_type, task_name, package, architecture, metric order by bucket) as cum,
              sum(n) over (partition by task_type, task_name, package, architecture, metric) as total
      from h
  )
  select task_type, task_name, package, architecture, metric, max(total) as runs,
         min(bucket) filter (where cum >= ceil(total * 0.5)) as median,
         min(bucket) filter (where cum >= ceil(total * 0.95)) as p95
    from c group by task_type, task_name, package, architecture, metric`;

function summarize(rows: SummaryRow[], keys: readonly StatisticsKey[], days: number): Map<string, TaskStatisticsSummary> {
  const out = new Map<string, { key: StatisticsKey; days: number; duration: MetricSummary | null; memory: MetricSummary | null; disk: MetricSummary | null }>();
  for (const key of keys) out.set(keyString(key), { key, days, duration: null, memory: null, disk: null });
  for (const r of rows) {
    const key = { taskType: r.task_type, taskName: r.task_name, package: r.package, architecture: r.architecture };
    const k = keyString(key);
    let entry = out.get(k);
    if (!entry) out.set(k, (entry = { key, days, duration: null, memory: null, disk: null }));
    const scale = r.metric === 'duration' ? 1 / 1000 : 1;
    entry[r.metric] = { count: Number(r.runs), median: bucketValue(Number(r.median)) * scale, p95: bucketValue(Number(r.p95)) * scale };
  }
  return out;
}

/** The aggregates of `keys` over the last `days` days (at most {@link STATISTICS_WINDOW_DAYS}), by {@link keyString}. */
export async function readTaskStatistics(em: EntityManager, keys: readonly StatisticsKey[], days = STATISTICS_WINDOW_DAYS): Promise<Map<string, TaskStatisticsSummary>> {
  if (!keys.length) return new Map();
  const col = (f: (k: StatisticsKey) => string) => textArray(keys.map(f));
  const rows = await em.execute<SummaryRow[]>(SUMMARY_SQL(`(task_type, task_name, package, architecture) in (select * from unnest(?::text[], ?::text[], ?::text[], ?::text[]))`), [
    days,
    col((k) => k.taskType),
    col((k) => k.taskName),
    col((k) => k.package),
    col((k) => k.architecture),
  ]);
  return summarize(rows, keys, days);
}

/** The aggregates of every task as a whole (package and architecture ''), over the window; only `metric` when given. */
export async function readTaskTotals(em: EntityManager, days = STATISTICS_WINDOW_DAYS, metric?: StatisticsMetric): Promise<TaskStatisticsSummary[]> {
  const rows = await em.execute<SummaryRow[]>(SUMMARY_SQL(`package = '' and architecture = ''${metric ? ' and metric = ?' : ''}`), metric ? [days, metric] : [days]);
  return [...summarize(rows, [], days).values()];
}

/** Deletes the histogram rows older than the window; returns how many. */
export async function pruneTaskStatistics(em: EntityManager, days = STATISTICS_WINDOW_DAYS): Promise<number> {
  const rows = await em.execute<{ n: string | number }[]>(
    `with gone as (delete from task_statistics_histogram where not (${inWindowSql('day')}) returning 1) select count(*) as n from gone`,
    [days],
  );
  return Number(rows[0]?.n ?? 0);
}
