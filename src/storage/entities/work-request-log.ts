import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { WorkRequestSchema } from './work-request.js';

/**
 * The state of one work request's output (services/work/job-output.ts): a small row, updated once per
 * chunk the agent sends, while the text itself goes to `work_request_log_chunk` rows. Positions are
 * byte offsets in the UTF-8 text of the whole output, kept or not: the first `headBytes` are kept
 * for good, the bytes from `tailStart` to `totalBytes` are the rolling tail, and what lies between
 * was dropped (TAGSCHED_MAX_LOG_BYTES).
 */
export const WorkRequestLogSchema = defineEntity({
  name: 'WorkRequestLog',
  tableName: 'work_request_log',
  properties: {
    workRequest: () => p.oneToOne(WorkRequestSchema).primary().owner().deleteRule('cascade'),
    /** The run (the request's `started_at`) that `agentOffset` counts for; a new run starts again at 0. */
    runStartedAt: p.datetime().nullable(),
    /** Bytes of the current run's output the agent has delivered, counted as the agent counts them. */
    agentOffset: p.bigint('number').default(0),
    totalBytes: p.bigint('number').default(0),
    headBytes: p.bigint('number').default(0),
    tailStart: p.bigint('number').default(0),
    updatedAt: p.datetime().defaultRaw('now()'),
  },
});
export type WorkRequestLog = InferEntity<typeof WorkRequestLogSchema>;
