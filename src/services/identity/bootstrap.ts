import type { EntityManager } from '@mikro-orm/postgresql';
import { lockForTransaction } from '../../storage/db/advisory-locks.js';
import { TokenSchema } from '../../storage/entities/token.js';
import { UserSchema } from '../../storage/entities/user.js';
import { hashToken, issueToken } from './tokens.js';

/** The account admin tokens of a fresh installation belong to. */
export const BOOTSTRAP_ADMIN = 'admin';

/** The label of the admin token set by TAGSCHED_ADMIN_TOKEN: how the next start finds the previous one. */
export const ENVIRONMENT_TOKEN_LABEL = 'TAGSCHED_ADMIN_TOKEN';

/**
 * Makes sure an admin can get in. With a configured token, that token exists (created if missing),
 * and the tokens an earlier value of the variable created are revoked: changing the variable takes
 * the old value back. A configured token someone revoked stays revoked (`revokedConfigured`).
 * On a database with no admin token at all, a new one is created and returned, to be shown once.
 */
export async function ensureAdminAccess(
  em: EntityManager,
  configuredToken: string | null,
): Promise<{ firstToken: string | null; revokedTokenIds: number[]; revokedConfigured: boolean }> {
  return em.transactional(async (tx) => {
    // Serialise concurrent first starts of several processes.
    await lockForTransaction(tx, 'BOOTSTRAP');
    let admin = await tx.findOne(UserSchema, { username: BOOTSTRAP_ADMIN });
    admin ??= tx.create(UserSchema, { username: BOOTSTRAP_ADMIN, isAdmin: true });
    let firstToken: string | null = null;
    const revokedTokenIds: number[] = [];
    let revokedConfigured = false;
    if (configuredToken) {
      const hash = hashToken(configuredToken);
      const existing = await tx.findOne(TokenSchema, { hash });
      if (!existing) issueToken(tx, { kind: 'admin', user: admin, label: ENVIRONMENT_TOKEN_LABEL }, configuredToken);
      else revokedConfigured = existing.revokedAt != null;
      const previous = await tx.find(TokenSchema, {
        label: ENVIRONMENT_TOKEN_LABEL,
        kind: 'admin',
        revokedAt: null,
        hash: { $ne: hash },
      });
      for (const token of previous) {
        token.revokedAt = new Date();
        revokedTokenIds.push(token.id);
      }
    } else if (!(await tx.count(TokenSchema, { kind: 'admin' }))) {
      firstToken = issueToken(tx, { kind: 'admin', user: admin, label: 'first start' }).value;
    }
    await tx.flush();
    return { firstToken, revokedTokenIds, revokedConfigured };
  });
}
