import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { TokenSchema, type Token } from '../../storage/entities/token.js';
import { UserSchema } from '../../storage/entities/user.js';
import { WorkerPoolSchema } from '../../storage/entities/worker-pool.js';
import { WorkerSchema } from '../../storage/entities/worker.js';
import {
  ERROR_CODES,
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import type { Events } from '../../storage/events.js';
import { isAdmin, type Viewer } from './auth.js';
import { issueToken } from './tokens.js';
import { parseInput } from '../input/validate.js';

/**
 * Who may do what with a token (docs/design.md: limits and tokens): admins with any token; a user with the tokens of their
 * own account; a worker with its own token (the one it presents). Anything else looks like a token
 * that does not exist. Activation tokens are one-shot: they may be revoked, not rotated.
 */
function mayManage(viewer: Viewer, token: Token): boolean {
  if (isAdmin(viewer)) return true;
  if (viewer.kind === 'user')
    return token.user?.id === viewer.user.id && (token.kind === 'user' || token.kind === 'admin');
  if (viewer.kind === 'worker') return token.id === viewer.tokenId;
  return false;
}

function parseTokenId(raw: string | number | null | undefined, viewer: Viewer, path: string): number {
  if (raw == null) {
    if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
    return viewer.tokenId; // the caller's own token
  }
  const id = Number(raw);
  if (!Number.isSafeInteger(id) || id <= 0)
    throw new InputError(ERROR_CODES.INVALID_INPUT, `${path}: "${raw}" is not a token id`, path);
  return id;
}

async function findManagedToken(
  em: EntityManager,
  viewer: Viewer,
  raw: string | number | null | undefined,
  path: string,
): Promise<Token> {
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  const id = parseTokenId(raw, viewer, path);
  const token = await em.findOne(TokenSchema, { id }, { populate: ['user', 'worker', 'pool'] });
  if (!token || !mayManage(viewer, token)) throw new NotFoundError(`${path}: no token ${raw ?? id}`, path);
  return token;
}

const expirySchema = (now: Date) =>
  z
    .date()
    .refine((d) => d.getTime() > now.getTime(), 'must be in the future')
    .nullish();

/**
 * Revokes tokens (already committed by the caller, or committed here) and tells every server
 * process, which closes their open WebSockets (app: `tokensRevoked`). The one place that announces
 * a revocation.
 */
export function announceRevoked(events: Events, tokenIds: readonly number[]): void {
  if (tokenIds.length) events.publish('tokensRevoked', { tokenIds: [...tokenIds] });
}

/** Revokes a token: it is refused from now on, and its open WebSockets are closed in every process. */
export async function revokeToken(
  em: EntityManager,
  viewer: Viewer,
  events: Events,
  input: { id?: string | number | null },
): Promise<Token> {
  const token = await findManagedToken(em, viewer, input.id, 'input.id');
  if (!token.revokedAt) {
    token.revokedAt = new Date();
    await em.flush();
  }
  announceRevoked(events, [token.id]);
  return token;
}

/**
 * Rotates a token: a new value for the same owner, kind and label, shown once, and the old one
 * revoked in the same transaction. Without `expiresAt` the new token lives as long as the old one
 * did (none when the old one had no expiry). A worker keeps its identity, its work and its
 * assignments: its agent, given the new value, reconnects as the same worker.
 */
export async function rotateToken(
  em: EntityManager,
  viewer: Viewer,
  events: Events,
  input: { id?: string | number | null; expiresAt?: Date | null },
): Promise<{ token: Token; value: string }> {
  const old = await findManagedToken(em, viewer, input.id, 'input.id');
  const now = new Date();
  const expiresAt = parseInput(expirySchema(now), input.expiresAt, 'input.expiresAt');
  if (old.kind === 'activation')
    throw new InvalidStateError('an activation token is used once: revoke it and create another');
  if (old.revokedAt) throw new InvalidStateError(`token ${old.id} is already revoked`);
  const lifetime = old.expiresAt ? old.expiresAt.getTime() - old.createdAt.getTime() : null;
  const issued = await em.transactional(async (tx) => {
    const locked = await tx.findOneOrFail(
      TokenSchema,
      { id: old.id, revokedAt: null },
      { failHandler: () => new InvalidStateError(`token ${old.id} is already revoked`) },
    );
    locked.revokedAt = now;
    const fresh = issueToken(tx, {
      kind: old.kind,
      label: old.label,
      user: old.user,
      worker: old.worker,
      pool: old.pool,
      expiresAt: expiresAt ?? (lifetime !== null ? new Date(now.getTime() + lifetime) : null),
    });
    await tx.flush();
    return fresh;
  });
  await em.refresh(old);
  announceRevoked(events, [old.id]);
  return issued;
}

/** A new user token for an account (admins: any user; a user: their own), shown once. */
export async function createToken(
  em: EntityManager,
  viewer: Viewer,
  input: { username?: string | null; label?: string | null; expiresAt?: Date | null },
): Promise<{ token: Token; value: string }> {
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  if (viewer.kind !== 'user') throw new ForbiddenError('tokens are created for users: a worker rotates its own token');
  const username = input.username ?? viewer.user.username;
  const user = await em.findOne(UserSchema, { username });
  if (!user || (!isAdmin(viewer) && user.id !== viewer.user.id))
    throw new NotFoundError(`input.username: no user "${username}"`, 'input.username');
  const label = parseInput(z.string().max(200).nullish(), input.label, 'input.label') ?? '';
  const expiresAt = parseInput(expirySchema(new Date()), input.expiresAt, 'input.expiresAt');
  const issued = issueToken(em, { kind: 'user', user, label, expiresAt });
  await em.flush();
  return issued;
}

/**
 * The tokens of a user or of a worker, newest first, without their values (which are never
 * stored), `limit` of them at most. Admins see anyone's; a user their own; a worker its own.
 */
export async function listTokens(
  em: EntityManager,
  viewer: Viewer,
  filter: { username?: string | null; worker?: string | null; pool?: string | null; limit?: number },
): Promise<Token[]> {
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  const given = [filter.username, filter.worker, filter.pool].filter((v) => v != null).length;
  if (given > 1)
    throw new InputError(
      ERROR_CODES.INVALID_INPUT,
      'give one of username, worker and pool',
      filter.pool != null ? 'pool' : 'worker',
    );
  let where: FilterQuery<Token>;
  if (filter.pool != null) {
    // A pool's tokens are its pool-wide activation tokens and those the provisioner made for its instances: admins only.
    const pool = isAdmin(viewer) ? await em.findOne(WorkerPoolSchema, { name: filter.pool }) : null;
    if (!pool) throw new NotFoundError(`pool: no worker pool "${filter.pool}"`, 'pool');
    where = { pool, kind: 'activation' };
  } else if (filter.worker != null) {
    const worker = await em.findOne(WorkerSchema, { name: filter.worker });
    const own = viewer.kind === 'worker' && worker?.id === viewer.worker.id;
    if (!worker || !(isAdmin(viewer) || own)) throw new NotFoundError(`worker: no worker "${filter.worker}"`, 'worker');
    where = { worker };
  } else if (viewer.kind === 'user') {
    const username = filter.username ?? viewer.user.username;
    const user = await em.findOne(UserSchema, { username });
    if (!user || (!isAdmin(viewer) && user.id !== viewer.user.id))
      throw new NotFoundError(`username: no user "${username}"`, 'username');
    where = { user };
  } else if (viewer.kind === 'worker' && filter.username == null) {
    where = { worker: viewer.worker };
  } else {
    throw new ForbiddenError("a worker token lists only its own worker's tokens");
  }
  return em.find(TokenSchema, where, {
    populate: ['user', 'worker', 'pool'],
    orderBy: { id: 'desc' },
    limit: filter.limit ?? undefined,
  });
}
