import type { EntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';
import type { TripStatement } from './one-trip.js';

/**
 * Every PostgreSQL advisory-lock key the service takes, in one place, with the reason for each, and
 * the only functions that take them: they coordinate server processes sharing one database, so two
 * of them must never share a number by accident. The embedded database serves one process and takes
 * none of the session-wide ones. The order in which one transaction may take them is in
 * src/scheduler/README.md (CLASSIFY before CREATE_CLASS; PASS alone).
 */
export const ADVISORY_LOCKS = {
  /** Migrations one process after another (a session lock on a dedicated connection, orm.ts). */
  MIGRATE: 72707369,
  /** The first admin token made once, when several processes start on an empty database. */
  BOOTSTRAP: 72707370,
  /** Shared while a request is classified, exclusive while the set of significant tags grows (classes.ts). */
  CLASSIFY: 72707371,
  /** One scheduling pass at a time across processes (pass.ts). */
  PASS: 72707372,
  /** Held from creating a task class to commit, so that class ids become visible in id order (classes.ts). */
  CREATE_CLASS: 72707373,
  /** One provisioner cycle at a time across processes (provisioner.ts): no instance is launched twice. */
  PROVISIONER: 72707374,
} as const;
export type AdvisoryLock = keyof typeof ADVISORY_LOCKS;

/** The statement that waits for the lock, held until its transaction ends: to send in one trip with what needs the lock (executeInOneTrip). */
export function lockForTransactionStatement(
  lock: AdvisoryLock,
  mode: 'exclusive' | 'shared' = 'exclusive',
): TripStatement {
  return {
    sql: `select ${mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock'}(?)`,
    params: [ADVISORY_LOCKS[lock]],
  };
}

/** Waits for the lock, held until the transaction of `em` ends. */
export async function lockForTransaction(
  em: EntityManager,
  lock: AdvisoryLock,
  mode: 'exclusive' | 'shared' = 'exclusive',
): Promise<void> {
  const { sql, params = [] } = lockForTransactionStatement(lock, mode);
  await em.execute(sql, [...params]);
}

/** Takes the lock until the transaction of `em` ends, if no one holds it; false (and no wait) if someone does. */
export async function tryLockForTransaction(em: EntityManager, lock: AdvisoryLock): Promise<boolean> {
  const [{ locked }] = await em.execute<{ locked: boolean }[]>('select pg_try_advisory_xact_lock(?) as locked', [
    ADVISORY_LOCKS[lock],
  ]);
  return locked;
}

/** Runs `body` holding the lock on a session of its own (`client`, connected by the caller), then releases it. */
export async function withSessionLock<T>(client: pg.Client, lock: AdvisoryLock, body: () => Promise<T>): Promise<T> {
  await client.query('select pg_advisory_lock($1)', [ADVISORY_LOCKS[lock]]);
  try {
    return await body();
  } finally {
    await client.query('select pg_advisory_unlock($1)', [ADVISORY_LOCKS[lock]]).catch(() => undefined);
  }
}
