import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { UserSchema } from './user.js';
import { WorkerSchema } from './worker.js';
import { WorkerPoolSchema } from './worker-pool.js';

/** Token kinds: admin and user act for a user, worker for one worker, activation is traded once for a worker token. */
export const TOKEN_KINDS = ['admin', 'user', 'worker', 'activation'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

/** A bearer token, stored as a SHA-256 hash: the plain value is shown once, when it is created. */
export const TokenSchema = defineEntity({
  name: 'Token',
  tableName: 'token',
  properties: {
    id: p.integer().primary().autoincrement(),
    hash: p.string().length(64).unique(),
    kind: p.enum([...TOKEN_KINDS]),
    label: p.string().length(200).default(''),
    user: () => p.manyToOne(UserSchema).nullable(),
    worker: () => p.manyToOne(WorkerSchema).nullable(),
    pool: () => p.manyToOne(WorkerPoolSchema).nullable(),
    enabled: p.boolean().default(true),
    createdAt: p.datetime().onCreate(() => new Date()),
    usedAt: p.datetime().nullable(),
    /** After this instant the token is refused (null: it does not expire). */
    expiresAt: p.datetime().nullable(),
    /** When it was revoked (by revokeToken, a rotation, or a new TAGSCHED_ADMIN_TOKEN); a revoked token is refused. */
    revokedAt: p.datetime().nullable(),
  },
});
export type Token = InferEntity<typeof TokenSchema>;
