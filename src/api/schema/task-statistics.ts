/** Query.taskStatistics: count, median and 95th percentile of a task's run time, peak memory and peak disk. */
import { builder } from '../builder.js';
import {
  BUCKET_RATIO,
  STATISTICS_WINDOW_DAYS,
  type MetricSummary,
  type TaskStatisticsSummary,
} from '../../scheduler/storage/task-statistics.js';
import { taskStatistics } from '../../services/work/task-statistics.js';

const accuracy = `an estimate is the upper bound of a logarithmic bucket: never below the true value, less than ${Math.round((BUCKET_RATIO - 1) * 100)}% above it`;

const MetricSummaryRef = builder.objectRef<MetricSummary>('MetricSummary').implement({
  description: `Count, median and 95th percentile (nearest rank) of one figure over the runs that reported it; ${accuracy}`,
  fields: (t) => ({
    count: t.exposeInt('count', { description: 'Runs that reported the figure' }),
    median: t.exposeFloat('median', { description: 'The median (seconds or bytes)' }),
    p95: t.exposeFloat('p95', { description: 'The 95th percentile (seconds or bytes)' }),
  }),
});

const TaskStatisticsRef = builder.objectRef<TaskStatisticsSummary>('TaskStatistics').implement({
  description: `What the runs of a task (or of a task for one source package and architecture) used over the last days, kept as they complete; ${accuracy}`,
  fields: (t) => ({
    taskType: t.string({ resolve: (s) => s.key.taskType, description: 'The task type' }),
    taskName: t.string({ resolve: (s) => s.key.taskName, description: 'The task name' }),
    package: t.string({
      nullable: true,
      resolve: (s) => s.key.package || null,
      description: 'The source package; null: the task as a whole, every package',
    }),
    architecture: t.string({
      nullable: true,
      resolve: (s) => s.key.architecture || null,
      description: 'The architecture; null: the task as a whole, every architecture',
    }),
    days: t.exposeInt('days', {
      description: 'The window: runs completed in the last this many days (UTC days, today included)',
    }),
    count: t.int({
      resolve: (s) => s.duration?.count ?? 0,
      description: 'Runs that reported statistics in the window',
    }),
    duration: t.field({
      type: MetricSummaryRef,
      nullable: true,
      resolve: (s) => s.duration,
      description: "The handler's run time, in seconds; null without runs",
    }),
    memory: t.field({
      type: MetricSummaryRef,
      nullable: true,
      resolve: (s) => s.memory,
      description:
        "Peak memory, in bytes (a run killed for memory counts as at least its worker's memory); null without figures",
    }),
    disk: t.field({
      type: MetricSummaryRef,
      nullable: true,
      resolve: (s) => s.disk,
      description:
        "Peak disk, in bytes (a run that filled its disk counts as at least its worker's disk); null without figures",
    }),
  }),
});

builder.queryFields((t) => ({
  taskStatistics: t.field({
    type: TaskStatisticsRef,
    description:
      "The aggregates of a task's runs: as a whole, any authenticated caller (they name no request, workspace or user); for one source package and architecture, admins only (FORBIDDEN for others: those count private workspaces' runs too)",
    args: {
      taskType: t.arg.string({ required: true, description: 'The task type, e.g. worker' }),
      taskName: t.arg.string({ required: true, description: 'The task name, e.g. sbuild' }),
      package: t.arg.string({
        description: 'The source package, given with architecture (admins); both omitted: the task as a whole',
      }),
      architecture: t.arg.string({ description: 'The architecture (worker:build-arch), given with package' }),
      days: t.arg.int({
        description: `The window in days, 1 to ${STATISTICS_WINDOW_DAYS} (default ${STATISTICS_WINDOW_DAYS})`,
      }),
    },
    resolve: (_r, args, ctx) => taskStatistics(ctx.em, ctx.viewer, args),
  }),
}));
