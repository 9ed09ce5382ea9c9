/**
 * The aggregates of task statistics (docs/reference/statistics.md): per task, and per task, source
 * package and architecture (core/tasks/statistics-key.ts), daily histograms of run time, peak memory and peak
 * disk per workspace, and per worker the count and highest bucket of its memory and disk figures. Both
 * are written in the statement that keeps a run's figures ({@link RECORD_RUN_SQL}), and read as count,
 * median and 95th percentile over a window of days. Nothing scans the runs themselves.
 *
 * Buckets are logarithmic, {@link BUCKET_RATIO} wide: value v (milliseconds of run time, bytes of memory
 * or disk; below 1 counts as 1) falls in bucket floor(ln v / ln 1.05). An estimate is the upper bound of
 * its bucket, 1.05^(bucket + 1): never below the nearest-rank percentile of the values, and less than 5%
 * above it. Size: one histogram row per key, workspace, metric, day and bucket used, one worker row per
 * key, workspace, metric (memory, disk), worker and day; at most two keys per run, so at most six
 * histogram rows and four worker rows per run completed in the window. Rows older than the window are
 * deleted by the hourly housekeeping.
 */
import { valuedTagRegex } from '../../core/tags/syntax.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray } from '../../storage/db/arrays.js';
import type { SqlCondition } from '../../storage/db/condition.js';
import type { StatisticsKey } from '../../core/tasks/statistics-key.js';
import type { FigureSources } from '../../core/tasks/learned-requirements.js';
import { RUN_STATISTICS_LIMITS, type RunStatistics } from '../../shared/run-statistics.js';

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

/** A valued tag of the worker `workerId` (`worker:memory-gib=N`), times `scale`, in SQL; null without one. */
const workerValueSql = (name: string, workerId: string, scale = 1) =>
  `(select max(substring(t from '${valuedTagRegex(name)}')::float8) * ${scale}
      from worker w cross join unnest(w.provided_tags) t
     where w.id = ${workerId} and t ~ '${valuedTagRegex(name)}')`;

/**
 * `value` no higher than `bound`, in SQL; null stays null. (PostgreSQL's least() skips a null: an
 * unknown figure given to it alone would come out as the bound.)
 */
const boundedSql = (value: string, bound: string) =>
  `case when ${value} is null then null else least(${value}, ${bound}) end`;

/**
 * Keeps the figures of one run (its parameters: {@link recordRunParams}) and counts
 * them, in the same statement, in today's aggregates of its task and of its task, package and
 * architecture. A request that has figures keeps them (a repeated report, a re-run) and is not counted
 * again; `insert … on conflict do update` keeps concurrent completions exact.
 *
 * What is kept is bounded by what the request's worker offers, and by RUN_STATISTICS_LIMITS where it
 * states nothing: peak memory by its `worker:memory-gib`, peak disk by its `worker:disk-gib`, CPU time
 * by the run time × the CPUs (the agent's count, or the worker's `worker:cpu-count` when lower). An
 * unknown figure (null) stays unknown and is counted in no aggregate.
 *
 * A run killed for memory (or that filled its disk) counts in the aggregates as having used at least
 * its worker's `worker:memory-gib` (`worker:disk-gib`), or the memory limit its agent applied when that
 * is lower, even when its peak is unknown; a worker that states no size adds nothing to the peak. So
 * learned minimums ask for more next time.
 */
export const RECORD_RUN_SQL = `
  with offers as (
    select r.id as work_request_id, r.worker_id, r.workspace_id,
           ${workerValueSql('worker:memory-gib', 'r.worker_id', 1024 ** 3)} as memory_offered,
           ${workerValueSql('worker:disk-gib', 'r.worker_id', 1024 ** 3)} as disk_offered,
           ${workerValueSql('worker:cpu-count', 'r.worker_id')} as cpus_offered
      from work_request r where r.id = ?
  ), kept as (
    insert into work_request_statistics (work_request_id, setup_seconds, run_seconds, teardown_seconds, cpu_seconds, peak_memory_bytes, peak_disk_bytes, cpu_count, memory_method, out_of_memory, disk_full, memory_limit_bytes)
    select o.work_request_id, v.setup, v.run, v.teardown,
           ${boundedSql('v.cpu', 'v.run * least(v.cpu_count, o.cpus_offered)')},
           ${boundedSql('v.memory', `least(o.memory_offered, ${RUN_STATISTICS_LIMITS.maxBytes})`)},
           ${boundedSql('v.disk', `least(o.disk_offered, ${RUN_STATISTICS_LIMITS.maxBytes})`)},
           v.cpu_count, v.method, v.oom, v.filled, v.memory_limit
      from offers o
      cross join (values (?::float8, ?::float8, ?::float8, ?::float8, ?::float8, ?::float8, ?::int, ?::text, ?::boolean, ?::boolean, ?::bigint))
        as v(setup, run, teardown, cpu, memory, disk, cpu_count, method, oom, filled, memory_limit)
    on conflict (work_request_id) do nothing
    returning work_request_id, run_seconds, peak_memory_bytes, peak_disk_bytes, out_of_memory, disk_full, memory_limit_bytes
  ), figures as (
    select distinct ?::text as task_type, ?::text as task_name, k.package, k.architecture, m.metric, ${bucketSql('m.value')} as bucket, o.workspace_id, o.worker_id
      from kept s
      join offers o on o.work_request_id = s.work_request_id
      cross join (values ('', ''), (?::text, ?::text)) as k(package, architecture)
      cross join lateral (values
        ('duration', s.run_seconds * 1000),
        ('memory', ${boundedSql(
          'case when s.out_of_memory then greatest(s.peak_memory_bytes::float8, least(s.memory_limit_bytes::float8, o.memory_offered)) else s.peak_memory_bytes::float8 end',
          `least(o.memory_offered, ${RUN_STATISTICS_LIMITS.maxBytes})`,
        )}),
        ('disk', ${boundedSql(
          'case when s.disk_full then greatest(s.peak_disk_bytes::float8, o.disk_offered) else s.peak_disk_bytes::float8 end',
          `least(o.disk_offered, ${RUN_STATISTICS_LIMITS.maxBytes})`,
        )})
      ) as m(metric, value)
     where m.value is not null
  ), histograms as (
    insert into task_statistics_histogram (task_type, task_name, package, architecture, metric, workspace_id, day, bucket, count)
    select task_type, task_name, package, architecture, metric, workspace_id, (now() at time zone 'UTC')::date, bucket, 1 from figures
    on conflict (task_type, task_name, package, architecture, metric, workspace_id, day, bucket) do update set count = task_statistics_histogram.count + 1
  ), sources as (
    insert into task_statistics_worker (task_type, task_name, package, architecture, metric, workspace_id, worker_id, day, runs, max_bucket)
    select task_type, task_name, package, architecture, metric, workspace_id, worker_id, (now() at time zone 'UTC')::date, 1, bucket
      from figures where metric <> 'duration' and worker_id is not null
    on conflict (task_type, task_name, package, architecture, metric, workspace_id, worker_id, day)
      do update set runs = task_statistics_worker.runs + 1, max_bucket = greatest(task_statistics_worker.max_bucket, excluded.max_bucket)
  )
  select 1`;

/** The parameters of {@link RECORD_RUN_SQL}: the request's id, its figures, and its statistics key. */
export const recordRunParams = (workRequestId: number, s: RunStatistics, key: StatisticsKey): unknown[] => [
  workRequestId,
  s.setupSeconds,
  s.runSeconds,
  s.teardownSeconds,
  s.cpuSeconds,
  s.peakMemoryBytes,
  s.peakDiskBytes,
  s.cpuCount,
  s.memoryMethod,
  s.outOfMemory ?? null,
  s.diskFull ?? null,
  s.memoryLimitBytes ?? null,
  key.taskType,
  key.taskName,
  key.package,
  key.architecture,
];

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

type SummaryRow = {
  task_type: string;
  task_name: string;
  package: string;
  architecture: string;
  metric: StatisticsMetric;
  runs: string | number;
  median: number;
  p95: number;
};

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

function summarize(
  rows: SummaryRow[],
  keys: readonly StatisticsKey[],
  days: number,
): Map<string, TaskStatisticsSummary> {
  const out = new Map<
    string,
    {
      key: StatisticsKey;
      days: number;
      duration: MetricSummary | null;
      memory: MetricSummary | null;
      disk: MetricSummary | null;
    }
  >();
  for (const key of keys) out.set(keyString(key), { key, days, duration: null, memory: null, disk: null });
  for (const r of rows) {
    const key = { taskType: r.task_type, taskName: r.task_name, package: r.package, architecture: r.architecture };
    const k = keyString(key);
    let entry = out.get(k);
    if (!entry) out.set(k, (entry = { key, days, duration: null, memory: null, disk: null }));
    const scale = r.metric === 'duration' ? 1 / 1000 : 1;
    entry[r.metric] = {
      count: Number(r.runs),
      median: bucketValue(Number(r.median)) * scale,
      p95: bucketValue(Number(r.p95)) * scale,
    };
  }
  return out;
}

/** The aggregates of `keys` over the last `days` days (at most {@link STATISTICS_WINDOW_DAYS}), by {@link keyString}. */
export async function readTaskStatistics(
  em: EntityManager,
  keys: readonly StatisticsKey[],
  days = STATISTICS_WINDOW_DAYS,
): Promise<Map<string, TaskStatisticsSummary>> {
  if (!keys.length) return new Map();
  const col = (f: (k: StatisticsKey) => string) => textArray(keys.map(f));
  const rows = await em.execute<SummaryRow[]>(
    SUMMARY_SQL(
      `(task_type, task_name, package, architecture) in (select * from unnest(?::text[], ?::text[], ?::text[], ?::text[]))`,
    ),
    [days, col((k) => k.taskType), col((k) => k.taskName), col((k) => k.package), col((k) => k.architecture)],
  );
  return summarize(rows, keys, days);
}

/** The aggregates of every task as a whole (package and architecture ''), over the window; only `metric` when given. */
export async function readTaskTotals(
  em: EntityManager,
  days = STATISTICS_WINDOW_DAYS,
  metric?: StatisticsMetric,
): Promise<TaskStatisticsSummary[]> {
  const rows = await em.execute<SummaryRow[]>(
    SUMMARY_SQL(`package = '' and architecture = ''${metric ? ' and metric = ?' : ''}`),
    metric ? [days, metric] : [days],
  );
  return [...summarize(rows, [], days).values()];
}

/** The rows of the workspaces `workspaces` (a condition over the `workspace` row its alias names) as a condition on `workspace_id`; none: every row. */
const workspaceFilter = (workspaces: ((alias: string) => SqlCondition) | null): SqlCondition => {
  if (!workspaces) return { sql: 'true', params: [] };
  const c = workspaces('stat_ws');
  return { sql: `workspace_id in (select stat_ws.id from workspace stat_ws where ${c.sql})`, params: c.params };
};

type SourcesRow = { metric: 'memory' | 'disk'; runs: string | number; p95: number; worker_maxima: number[] };

/**
 * What the aggregates of `key` say of its memory and disk over the window, for learned minimums
 * (core/tasks/learned-requirements.ts): the runs that reported each, their 95th percentile, and the highest
 * figure of each worker that reported it (bytes: the upper bounds of their buckets). Only the runs of the
 * workspaces `workspaces` selects count (a condition over the `workspace` row its alias names; null:
 * every run, those counted before workspaces were kept included). A resource without runs is null.
 */
export async function readLearnedSources(
  em: EntityManager,
  key: StatisticsKey,
  workspaces: ((alias: string) => SqlCondition) | null,
): Promise<{ memory: FigureSources | null; disk: FigureSources | null }> {
  const ws = workspaceFilter(workspaces);
  const keySql = `task_type = ? and task_name = ? and package = ? and architecture = ? and metric in ('memory', 'disk')`;
  const keyParams = [key.taskType, key.taskName, key.package, key.architecture];
  const rows = await em.execute<SourcesRow[]>(
    `with s as (${SUMMARY_SQL(`${keySql} and ${ws.sql}`)}),
     w as (
       select metric, worker_id, max(max_bucket) as b from task_statistics_worker
        where ${inWindowSql('day')} and ${keySql} and ${ws.sql}
        group by metric, worker_id
     )
     select s.metric, s.runs, s.p95, coalesce((select to_json(array_agg(w.b order by w.b desc)) from w where w.metric = s.metric), '[]'::json) as worker_maxima
       from s`,
    [STATISTICS_WINDOW_DAYS, ...keyParams, ...ws.params, STATISTICS_WINDOW_DAYS, ...keyParams, ...ws.params],
  );
  const out: { memory: FigureSources | null; disk: FigureSources | null } = { memory: null, disk: null };
  for (const r of rows)
    out[r.metric] = {
      count: Number(r.runs),
      p95: bucketValue(Number(r.p95)),
      workerMaxima: r.worker_maxima.map((b) => bucketValue(Number(b))),
    };
  return out;
}

/** Deletes the aggregates' rows (histograms and workers) older than the window; returns how many. */
export async function pruneTaskStatistics(em: EntityManager, days = STATISTICS_WINDOW_DAYS): Promise<number> {
  const rows = await em.execute<{ n: string | number }[]>(
    `with h as (delete from task_statistics_histogram where not (${inWindowSql('day')}) returning 1),
          w as (delete from task_statistics_worker where not (${inWindowSql('day')}) returning 1)
     select (select count(*) from h) + (select count(*) from w) as n`,
    [days, days],
  );
  return Number(rows[0]?.n ?? 0);
}
