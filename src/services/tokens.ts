import { createHash, randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { TokenSchema, type Token, type TokenKind } from '../entities/token.js';
import type { User } from '../entities/user.js';
import type { WorkerPool } from '../entities/worker-pool.js';
import type { Worker } from '../entities/worker.js';

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
  owner: { kind: TokenKind; label?: string; user?: User; worker?: Worker; pool?: WorkerPool },
  value: string = newTokenValue(owner.kind),
): { token: Token; value: string } {
  const token = em.create(TokenSchema, {
    hash: hashToken(value),
    kind: owner.kind,
    label: owner.label ?? '',
    user: owner.user ?? null,
    worker: owner.worker ?? null,
    pool: owner.pool ?? null,
  });
  return { token, value };
}
