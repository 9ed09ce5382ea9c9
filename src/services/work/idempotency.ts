import { createHash } from 'node:crypto';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { IdempotencyKeySchema } from '../../storage/entities/idempotency-key.js';
import { ERROR_CODES, ForbiddenError, InputError } from '../../core/errors.js';
import { isAdmin, requireUser, type Viewer } from '../identity/auth.js';
import type { SecretBox } from '../identity/secrets.js';
import { parseInput } from '../input/validate.js';

const KEY_CONSTRAINT = 'idempotency_key_user_id_key_unique';
const keySchema = z
  .string()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces');

/** JSON with sorted keys: the same input always hashes the same, whatever the order of its fields. */
function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** How a create is recorded and answered again: the id of what it made (the ids, for a batch), and the secret it showed once. */
export interface Replayable<T> {
  idOf(result: T): number | readonly number[];
  /** The token the create returned, if any: kept sealed so that a retry can show it (the first answer was lost). */
  secretOf?(result: T): string | null;
  /** The first create's answer, rebuilt from its id (and secret); `ids` are all it made, in order (just `id` for one). */
  replay(em: EntityManager, id: number, secret: string | null, ids: readonly number[]): Promise<T>;
  /**
   * Whether the caller may read that answer now (a replay is refused otherwise): what it made may have
   * become hidden from them since (removed from a private workspace, no longer an admin).
   */
  mayRead(em: EntityManager, viewer: Viewer, result: T): Promise<boolean> | boolean;
}

/** mayRead of the creates only admins may make (a replay of those may show a token again). */
export const adminsOnly = (_em: EntityManager, viewer: Viewer): boolean => isAdmin(viewer);

/** What an idempotent create needs from its caller. */
export interface IdempotencyDeps {
  em: EntityManager;
  viewer: Viewer;
  secrets: SecretBox;
  ttlMs: number;
}

/**
 * Runs a create at most once per (user, key) within the key's lifetime (docs/design.md: limits and tokens): a retry with the
 * same key and the same input answers the first create's result; the same key with another input
 * is refused (IDEMPOTENCY_KEY_REUSED). `create` gets `record`, which it calls inside its own
 * transaction once the thing exists, so the key and the creation commit together; of two concurrent
 * creates with one key, the second's transaction fails on the key's unique constraint, nothing of
 * it is kept, and it answers the first one's result. A replay answers only what the caller may read
 * now (Replayable.mayRead), else ForbiddenError. Without a key, `create` just runs.
 */
export async function idempotent<T>(
  deps: IdempotencyDeps,
  operation: string,
  rawKey: string | null | undefined,
  input: unknown,
  how: Replayable<T>,
  create: (record: (tx: EntityManager, result: T) => Promise<void>) => Promise<T>,
): Promise<T> {
  if (rawKey == null) return create(async () => undefined);
  const key = parseInput(keySchema, rawKey, 'idempotencyKey');
  const { user } = requireUser(deps.viewer);
  const inputHash = createHash('sha256')
    .update(`${operation}\n${stableJson(input)}`)
    .digest('hex');
  const cutoff = new Date(Date.now() - deps.ttlMs);

  const answerFrom = async (): Promise<T | null> => {
    const found = await deps.em
      .fork()
      .findOne(IdempotencyKeySchema, { user: user.id, key, createdAt: { $gt: cutoff } });
    if (!found) return null;
    if (found.operation !== operation || found.inputHash !== inputHash) {
      throw new InputError(
        ERROR_CODES.IDEMPOTENCY_KEY_REUSED,
        `idempotencyKey: "${key}" was used ${found.operation === operation ? 'with another input' : `for ${found.operation}`}; use a new key for a new ${operation}`,
        'idempotencyKey',
      );
    }
    const answer = await how.replay(
      deps.em,
      found.resultId,
      found.sealedSecret ? deps.secrets.open(found.sealedSecret) : null,
      found.resultIds ?? [found.resultId],
    );
    if (!(await how.mayRead(deps.em, deps.viewer, answer))) {
      throw new ForbiddenError(
        `idempotencyKey: what "${key}" created is no longer yours to read; use a new key for a new ${operation}`,
      );
    }
    return answer;
  };

  const replayed = await answerFrom();
  if (replayed !== null) return replayed;
  // An expired key of this user may be used again.
  await deps.em.nativeDelete(IdempotencyKeySchema, { user: user.id, key, createdAt: { $lte: cutoff } });
  try {
    return await create(async (tx, result) => {
      const secret = how.secretOf?.(result) ?? null;
      const made = how.idOf(result);
      const ids = typeof made === 'number' ? null : [...made];
      await tx.insert(IdempotencyKeySchema, {
        user: user.id,
        key,
        operation,
        inputHash,
        resultId: ids ? (ids[0] ?? 0) : (made as number),
        resultIds: ids,
        sealedSecret: secret ? deps.secrets.seal(secret) : null,
        createdAt: new Date(),
      });
    });
  } catch (err) {
    const constraint = (err as { constraint?: unknown }).constraint;
    if (!(err instanceof UniqueConstraintViolationException) || constraint !== KEY_CONSTRAINT) throw err;
    const winner = await answerFrom(); // a concurrent create with this key committed first
    if (winner === null) throw err;
    return winner;
  }
}

/** Deletes the keys older than their lifetime; returns how many. */
export async function purgeIdempotencyKeys(em: EntityManager, ttlMs: number, now = new Date()): Promise<number> {
  return em.nativeDelete(IdempotencyKeySchema, { createdAt: { $lte: new Date(now.getTime() - ttlMs) } });
}
