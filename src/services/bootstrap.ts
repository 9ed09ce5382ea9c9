import type { EntityManager } from '@mikro-orm/postgresql';
import { TokenSchema } from '../entities/token.js';
import { UserSchema } from '../entities/user.js';
import { hashToken, issueToken } from './tokens.js';

/** The account admin tokens of a fresh installation belong to. */
export const BOOTSTRAP_ADMIN = 'admin';

/**
 * Makes sure an admin can get in. With a configured token, that token exists (created if missing).
 * On a database with no admin token at all, a new one is created and returned, to be shown once.
 */
export async function ensureAdminAccess(em: EntityManager, configuredToken: string | null): Promise<{ firstToken: string | null }> {
  return em.transactional(async (tx) => {
    // Serialise concurrent first starts of several processes.
    await tx.execute('select pg_advisory_xact_lock(72707370)');
    let admin = await tx.findOne(UserSchema, { username: BOOTSTRAP_ADMIN });
    admin ??= tx.create(UserSchema, { username: BOOTSTRAP_ADMIN, isAdmin: true });
    let firstToken: string | null = null;
    if (configuredToken) {
      if (!(await tx.count(TokenSchema, { hash: hashToken(configuredToken) }))) {
        issueToken(tx, { kind: 'admin', user: admin, label: 'TAGSCHED_ADMIN_TOKEN' }, configuredToken);
      }
    } else if (!(await tx.count(TokenSchema, { kind: 'admin' }))) {
      firstToken = issueToken(tx, { kind: 'admin', user: admin, label: 'first start' }).value;
    }
    await tx.flush();
    return { firstToken };
  });
}
