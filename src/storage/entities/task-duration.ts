import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * How long a task ran, summed per task and day (UTC) as requests complete: demand estimates work
 * from the last 30 days of these few rows instead of scanning the history of every request.
 */
export const TaskDurationSchema = defineEntity({
  name: 'TaskDuration',
  tableName: 'task_duration',
  properties: {
    taskType: p.text().primary(),
    taskName: p.text().primary(),
    day: p.date().primary(),
    runs: p.integer().default(0),
    seconds: p.double().default(0),
  },
});
export type TaskDuration = InferEntity<typeof TaskDurationSchema>;
