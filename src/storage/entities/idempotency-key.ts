import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { UserSchema } from './user.js';

/**
 * A create that took an idempotency key, kept for TAGSCHED_IDEMPOTENCY_KEY_TTL_SECONDS: a retry with
 * the same key by the same user answers with `resultId` (or `resultIds`) (and the token shown the first time, sealed
 * with the secret key, for creates that return one) instead of creating again.
 */
export const IdempotencyKeySchema = defineEntity({
  name: 'IdempotencyKey',
  tableName: 'idempotency_key',
  uniques: [{ properties: ['user', 'key'] }],
  properties: {
    id: p.integer().primary().autoincrement(),
    user: () => p.manyToOne(UserSchema).deleteRule('cascade'),
    key: p.string().length(200),
    /** The mutation, e.g. createWorkRequest. */
    operation: p.string().length(50),
    /** SHA-256 of the mutation's input: the same key with another input is refused. */
    inputHash: p.string().length(64),
    resultId: p.integer(),
    /** Every id a batch create made, in order (null for a create of one: `resultId`). */
    resultIds: p
      .array((v) => Number(v))
      .columnType('int[]')
      .nullable(),
    sealedSecret: p.text().nullable(),
    createdAt: p
      .datetime()
      .onCreate(() => new Date())
      .index(),
  },
});
export type IdempotencyKey = InferEntity<typeof IdempotencyKeySchema>;
