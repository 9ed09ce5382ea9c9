import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { WorkRequestSchema } from './work-request.js';

/**
 * A piece of a work request's output, as one agent batch delivered it (or several small ones merged
 * when the request completed). Rows, not appends to one growing value: PostgreSQL rewrites a whole
 * text value on every update, so appending to one row would write the log again and again.
 */
export const WorkRequestLogChunkSchema = defineEntity({
  name: 'WorkRequestLogChunk',
  tableName: 'work_request_log_chunk',
  properties: {
    workRequest: () => p.manyToOne(WorkRequestSchema).primary().deleteRule('cascade'),
    /** Byte offset of its first byte in the whole output. */
    start: p.bigint('number').primary(),
    /** Its length in bytes of UTF-8. */
    bytes: p.integer(),
    data: p.text(),
  },
});
export type WorkRequestLogChunk = InferEntity<typeof WorkRequestLogChunkSchema>;
