import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { TokenSchema, type Token, type TokenKind } from '../../storage/entities/token.js';
import type { User } from '../../storage/entities/user.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import type { Worker } from '../../storage/entities/worker.js';
import { intArray } from '../../storage/db/arrays.js';

/** The SHA-256 hex digest under which a token is stored; the plain value is never stored. */
export function hashToken(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** A new random token value; the prefix tells a reader what kind of token leaked, without revealing it. */
export function newTokenValue(kind: TokenKind): string {
  return `tsk_${kind}_${randomBytes(24).toString('base64url')}`;
}

/** Persists (at the next flush) a token for the owner and returns its plain value, which is shown once. */
export function issueToken(
  em: EntityManager,
  owner: {
    kind: TokenKind;
    label?: string;
    user?: User | null;
    worker?: Worker | null;
    pool?: WorkerPool | null;
    expiresAt?: Date | null;
  },
  value: string = newTokenValue(owner.kind),
): { token: Token; value: string } {
  const token = em.create(TokenSchema, {
    hash: hashToken(value),
    kind: owner.kind,
    label: owner.label ?? '',
    user: owner.user ?? null,
    worker: owner.worker ?? null,
    pool: owner.pool ?? null,
    expiresAt: owner.expiresAt ?? null,
  });
  return { token, value };
}

/** The refusal of a worker token whose worker was stopped: the normal end of a pool instance, not a guess (client-auth.ts). */
export const WORKER_TERMINATED = 'the worker of this token is terminated';

/**
 * Why a token is refused, or null when it may be used. This is the rule of docs/design.md: limits and tokens in TypeScript;
 * VALID_TOKEN_SQL is the same rule in SQL (a test checks that they agree). `workerTerminated` is the
 * token's worker's state (false when it has none).
 */
export function tokenRefusal(
  token: Pick<Token, 'kind' | 'enabled' | 'revokedAt' | 'expiresAt' | 'usedAt'>,
  workerTerminated: boolean,
  now: Date,
): string | null {
  if (token.revokedAt) return 'the bearer token was revoked';
  // Terminating a worker disables its tokens: say why, rather than only that it is disabled.
  if (workerTerminated && token.kind === 'worker') return WORKER_TERMINATED;
  if (!token.enabled)
    return token.kind === 'activation' && token.usedAt
      ? 'the activation token was already used'
      : 'the bearer token is disabled';
  if (token.expiresAt && token.expiresAt.getTime() <= now.getTime()) return 'the bearer token has expired';
  if (token.kind === 'activation' && token.usedAt) return 'the activation token was already used';
  if (workerTerminated) return WORKER_TERMINATED;
  return null;
}

/** The rule of tokenRefusal as a condition on `token t` (PostgreSQL's now() is the clock). */
export const VALID_TOKEN_SQL = `t.enabled and t.revoked_at is null and (t.expires_at is null or t.expires_at > now())
  and not (t.kind = 'activation' and t.used_at is not null)
  and not exists (select 1 from worker w where w.id = t.worker_id and w.terminated_at is not null)`;

/** Of these token ids, the ones that may still be used (one statement). */
export async function stillValidTokenIds(em: EntityManager, ids: readonly number[]): Promise<Set<number>> {
  if (!ids.length) return new Set();
  const rows = await em.execute<{ id: number }[]>(
    `select t.id from token t where t.id = any(?::int[]) and ${VALID_TOKEN_SQL}`,
    [intArray(ids)],
  );
  return new Set(rows.map((r) => r.id));
}
