import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * One bucket of a daily histogram of task statistics (scheduler/storage/task-statistics.ts): how many
 * runs of a task (package and architecture '': the task as a whole) in one workspace completed on a day
 * (UTC) with a figure (`duration` in milliseconds, `memory` and `disk` in bytes) in a logarithmic bucket.
 * Workspace 0: counted before workspaces were kept. Written and read by SQL only; rows older than the
 * window are deleted by the housekeeping.
 */
export const TaskStatisticsHistogramSchema = defineEntity({
  name: 'TaskStatisticsHistogram',
  tableName: 'task_statistics_histogram',
  properties: {
    taskType: p.text().primary(),
    taskName: p.text().primary(),
    package: p.text().primary(),
    architecture: p.text().primary(),
    metric: p.text().primary(),
    workspaceId: p.integer().primary().default(0),
    day: p.date().primary(),
    bucket: p.integer().primary(),
    count: p.integer(),
  },
  indexes: [{ name: 'task_statistics_histogram_day', properties: ['day'] }],
});
export type TaskStatisticsHistogram = InferEntity<typeof TaskStatisticsHistogramSchema>;
