import type { EntityManager } from '@mikro-orm/postgresql';
import { TokenSchema } from '../../storage/entities/token.js';
import { UserSchema, type User } from '../../storage/entities/user.js';
import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import { WorkerSchema, type Worker } from '../../storage/entities/worker.js';
import { ForbiddenError, UnauthenticatedError } from '../../core/errors.js';
import { hashToken, tokenRefusal, WORKER_TERMINATED } from './tokens.js';

/** Who is asking: resolved once per operation from the bearer token (`tokenId` is that token). */
export type Viewer =
  | { readonly kind: 'anonymous' }
  | { readonly kind: 'user'; readonly user: User; readonly isAdmin: boolean; readonly tokenId: number }
  | { readonly kind: 'worker'; readonly worker: Worker; readonly tokenId: number }
  /** A one-shot activation token: pool-wide (an admin made it), or bound to the worker the provisioner created for one instance. */
  | {
      readonly kind: 'activation';
      readonly pool: WorkerPool;
      readonly tokenId: number;
      readonly workerId: number | null;
    };

/**
 * A viewer reduced to ids, to keep for as long as a connection lives: entities would hold the
 * EntityManager they were read with, and everything it read.
 */
export type ViewerIdentity =
  | { readonly kind: 'anonymous' }
  | { readonly kind: 'user'; readonly userId: number; readonly isAdmin: boolean; readonly tokenId: number }
  | { readonly kind: 'worker'; readonly workerId: number; readonly tokenId: number }
  | {
      readonly kind: 'activation';
      readonly poolId: number;
      readonly tokenId: number;
      readonly workerId: number | null;
    };

/** The ids of a viewer. */
export function identityOf(viewer: Viewer): ViewerIdentity {
  switch (viewer.kind) {
    case 'anonymous':
      return viewer;
    case 'user':
      return { kind: 'user', userId: viewer.user.id, isAdmin: viewer.isAdmin, tokenId: viewer.tokenId };
    case 'worker':
      return { kind: 'worker', workerId: viewer.worker.id, tokenId: viewer.tokenId };
    case 'activation':
      return { kind: 'activation', poolId: viewer.pool.id, tokenId: viewer.tokenId, workerId: viewer.workerId };
  }
}

/** A viewer again, in an EntityManager, with references (ids, not loaded rows) for its entities. */
export function viewerIn(em: EntityManager, identity: ViewerIdentity): Viewer {
  switch (identity.kind) {
    case 'anonymous':
      return identity;
    case 'user':
      return {
        kind: 'user',
        user: em.getReference(UserSchema, identity.userId),
        isAdmin: identity.isAdmin,
        tokenId: identity.tokenId,
      };
    case 'worker':
      return { kind: 'worker', worker: em.getReference(WorkerSchema, identity.workerId), tokenId: identity.tokenId };
    case 'activation':
      return {
        kind: 'activation',
        pool: em.getReference(WorkerPoolSchema, identity.poolId),
        tokenId: identity.tokenId,
        workerId: identity.workerId,
      };
  }
}

/**
 * Why a presented token was refused; the service answers 401 with this text and nothing else.
 * `retired`: a real token of a worker that was stopped (its agent still draining or exiting), not a
 * guess.
 */
export class BadTokenError extends Error {
  constructor(
    message: string,
    readonly retired = false,
  ) {
    super(message);
    this.name = 'BadTokenError';
  }
}

/** A presented token, accepted: who it acts for, and until when (null: no expiry). */
export interface Authenticated {
  readonly viewer: Viewer;
  readonly expiresAt: Date | null;
}

/**
 * A token by its hash with whoever it acts for, in one statement: every authenticated operation runs
 * it, and the ORM's populating find costs several times its CPU (rows as JSON, mapped into entities).
 */
const TOKEN_WITH_OWNER_SQL = `
  select to_jsonb(t) as t, to_jsonb(u) as u, to_jsonb(w) as w, to_jsonb(p) as p
    from token t
    left join app_user u on u.id = t.user_id
    left join worker w on w.id = t.worker_id
    left join worker_pool p on p.id = t.pool_id
   where t.hash = ?`;

/**
 * Reads `Bearer <token>` (or a bare token) and returns the viewer; throws BadTokenError for a token
 * that is unknown, or refused by the rule of tokenRefusal (revoked, disabled, expired, …).
 */
export async function authenticate(
  em: EntityManager,
  presented: string | null | undefined,
  now = new Date(),
): Promise<Authenticated> {
  if (!presented) return { viewer: { kind: 'anonymous' }, expiresAt: null };
  const value = presented.replace(/^Bearer\s+/i, '').trim();
  if (!value) return { viewer: { kind: 'anonymous' }, expiresAt: null };
  const [row] = await em.execute<{ t: object; u: object | null; w: object | null; p: object | null }[]>(
    TOKEN_WITH_OWNER_SQL,
    [hashToken(value)],
  );
  if (!row) throw new BadTokenError('the bearer token is not valid');
  // Its owners first, so that the token's references are these loaded entities.
  if (row.u) em.map(UserSchema, row.u);
  if (row.w) em.map(WorkerSchema, row.w);
  if (row.p) em.map(WorkerPoolSchema, row.p);
  const token = em.map(TokenSchema, row.t);
  const refusal = tokenRefusal(token, token.worker?.terminatedAt != null, now);
  if (refusal) throw new BadTokenError(refusal, refusal === WORKER_TERMINATED);
  const expiresAt = token.expiresAt ?? null;
  switch (token.kind) {
    case 'admin':
    case 'user':
      if (!token.user) throw new BadTokenError('the bearer token has no user');
      return {
        viewer: {
          kind: 'user',
          user: token.user,
          isAdmin: token.kind === 'admin' || token.user.isAdmin,
          tokenId: token.id,
        },
        expiresAt,
      };
    case 'worker':
      if (!token.worker) throw new BadTokenError('the bearer token has no worker');
      return { viewer: { kind: 'worker', worker: token.worker, tokenId: token.id }, expiresAt };
    case 'activation':
      if (!token.pool) throw new BadTokenError('the activation token has no pool');
      return {
        viewer: { kind: 'activation', pool: token.pool, tokenId: token.id, workerId: token.worker?.id ?? null },
        expiresAt,
      };
    default:
      throw new BadTokenError('the bearer token is of an unknown kind');
  }
}

/** The viewer of a presented token (see authenticate). */
export async function resolveViewer(em: EntityManager, presented: string | null | undefined): Promise<Viewer> {
  return (await authenticate(em, presented)).viewer;
}

/** The token the viewer presented, or null for anonymous callers. */
export function tokenIdOf(viewer: Viewer | ViewerIdentity): number | null {
  return viewer.kind === 'anonymous' ? null : viewer.tokenId;
}

/** The acting user, or a typed error for workers and anonymous callers. */
export function requireUser(viewer: Viewer): { user: User; isAdmin: boolean } {
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  if (viewer.kind !== 'user') throw new ForbiddenError('this operation is for users, not worker tokens');
  return viewer;
}

/** The acting admin, or a typed error. */
export function requireAdmin(viewer: Viewer): User {
  const { user, isAdmin } = requireUser(viewer);
  if (!isAdmin) throw new ForbiddenError('only admins may do this');
  return user;
}

/** The acting worker, or a typed error. */
export function requireWorker(viewer: Viewer): Worker {
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  if (viewer.kind !== 'worker') throw new ForbiddenError('this operation needs a worker token');
  return viewer.worker;
}

/** True when the viewer is an admin user. */
export function isAdmin(viewer: Viewer): boolean {
  return viewer.kind === 'user' && viewer.isAdmin;
}
