import type { EntityManager } from '@mikro-orm/postgresql';
import type { Context } from '../context.js';
import { idempotent, type Replayable } from '../../services/work/idempotency.js';

/** The description of every create's `idempotencyKey` argument. */
export const IDEMPOTENCY_KEY_DESCRIPTION =
  'Optional, up to 200 printable characters: a retry with the same key (same user, within a day) answers the first create instead of creating again; the same key with another input is IDEMPOTENCY_KEY_REUSED';

/**
 * Runs a create of a resolver under its idempotency key: `create(tx)` runs in a transaction in which
 * the key is recorded too (services/work/idempotency.ts).
 */
export function createOnce<T>(
  ctx: Context,
  operation: string,
  key: string | null | undefined,
  input: unknown,
  how: Replayable<T>,
  create: (tx: EntityManager) => Promise<T>,
): Promise<T> {
  return idempotent(
    { em: ctx.em, viewer: ctx.viewer, secrets: ctx.secrets, ttlMs: ctx.config.input.idempotencyKeyTtlMs },
    operation,
    key,
    input,
    how,
    (record) =>
      ctx.em.transactional(async (tx) => {
        const result = await create(tx);
        await record(tx, result);
        return result;
      }),
  );
}
