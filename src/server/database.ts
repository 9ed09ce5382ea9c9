import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import type { ServerConfig } from '../core/config/server.js';
import { ConfigError } from '../core/config/variables.js';
import { startEmbeddedPg, type EmbeddedPg } from './embedded-pg.js';
import type { Logger } from '../core/log.js';
import { ormLogging } from '../api/log-adapters.js';
import { listenHearsNotify } from '../storage/events.js';
import { connectSession, createOrm, migrate, type DbTarget } from '../storage/orm.js';
import { SessionConnectionError, shownDatabaseUrl } from './startup-errors.js';

/** How long start-up waits for LISTEN on the session URL to hear a NOTIFY sent through the pool (checkSessionUrl). */
export const SESSION_CHECK_MS = 5_000;

/** An open, migrated database: the ORM, the embedded server when there is no URL, and the migrations applied. */
export interface OpenDatabase {
  readonly orm: MikroORM;
  readonly embedded: EmbeddedPg | null;
  /** Every migration there is now (what /readyz checks is still applied). */
  readonly migrations: readonly string[];
}

/**
 * The URL of the service's session connections (LISTEN, the migration lock): TAGSCHED_DATABASE_SESSION_URL,
 * else DATABASE_URL; null for the embedded database.
 */
export function databaseSessionUrl(config: ServerConfig): string | null {
  return config.databaseUrl ? (config.databaseSessionUrl ?? config.databaseUrl) : null;
}

/**
 * The idle_in_transaction_session_timeout (ms) the pool's connections ask PostgreSQL for, or null: only
 * when DATABASE_URL is PostgreSQL itself. PostgreSQL then ends the session of a process that stopped in
 * the middle of a transaction (SIGSTOP, a frozen VM, a cut network), which frees the row locks it held,
 * the leader lease's among them, instead of keeping them until that process comes back. A transaction
 * pooler (TAGSCHED_DATABASE_SESSION_URL set) refuses a startup parameter it does not know; PgBouncer's
 * idle_transaction_timeout does the same there (docs/operating/replicas.md).
 */
export function idleTransactionTimeout(config: ServerConfig): number | null {
  if (!config.databaseUrl || config.databaseSessionUrl) return null;
  return config.databaseIdleTransactionTimeoutMs || null;
}

/**
 * Opens the database (embedded when no URL) and migrates it. With a URL, before anything is written, a
 * LISTEN on the session URL must hear a NOTIFY sent through the pool (checkSessionUrl); the same session
 * connection then holds the migration lock while the migrations run on the pool.
 */
export async function openDatabase(config: ServerConfig, log: Logger): Promise<OpenDatabase> {
  let embedded: EmbeddedPg | null = null;
  let target: DbTarget;
  if (config.databaseUrl) {
    target = { clientUrl: config.databaseUrl };
  } else {
    embedded = await startEmbeddedPg(config.dataDir);
    target = embedded.target;
    log.info(
      { dataDir: embedded.dataDir },
      'no DATABASE_URL: using the embedded PostgreSQL (PGlite); set DATABASE_URL to use a PostgreSQL server',
    );
  }
  // PGlite serves one session: one pooled connection, or transactions on two connections deadlock.
  const logging = ormLogging(log);
  const idle = idleTransactionTimeout(config);
  const orm = await createOrm(target, {
    pool: embedded ? { min: 0, max: 1 } : { min: 0, max: config.databasePoolSize },
    ...logging,
    driverOptions: {
      ...logging.driverOptions,
      ...(idle ? { connection: { idle_in_transaction_session_timeout: idle } } : {}),
    },
  });
  try {
    const sessionUrl = databaseSessionUrl(config);
    let applied: string[];
    if (sessionUrl) {
      const session = await connectSession(sessionUrl).catch((err: unknown) => {
        throw config.databaseSessionUrl ? new SessionConnectionError(err) : err;
      });
      try {
        await checkSessionUrl(orm, session, config);
        applied = await migrate(orm, session);
      } finally {
        await session.end().catch(() => undefined);
      }
    } else applied = await migrate(orm, null);
    if (applied.length) log.info({ migrations: applied }, 'database migrated');
    // What /readyz checks is still applied: every migration there is now.
    const migrations = (await orm.migrator.getExecutedMigrations()).map((m) => m.name);
    return { orm, embedded, migrations };
  } catch (err) {
    await orm.close(true).catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    throw err;
  }
}

/**
 * Refuses to start (a ConfigError) unless a LISTEN on the `session` connection hears, within
 * SESSION_CHECK_MS, a NOTIFY sent through the ORM's pool: events between the processes go that way,
 * and through a transaction pooler (PgBouncer in transaction mode) LISTEN hears nothing, silently.
 */
async function checkSessionUrl(orm: MikroORM, session: pg.Client, config: ServerConfig): Promise<void> {
  const notify = (channel: string, payload: string) =>
    orm.em.getConnection().execute('select pg_notify(?, ?)', [channel, payload]);
  if (await listenHearsNotify(session, notify, SESSION_CHECK_MS)) return;
  const seconds = SESSION_CHECK_MS / 1000;
  const pool = shownDatabaseUrl(config.databaseUrl!);
  throw new ConfigError(
    config.databaseSessionUrl
      ? `a LISTEN on TAGSCHED_DATABASE_SESSION_URL (${shownDatabaseUrl(config.databaseSessionUrl)}) did not hear, within ${seconds} s, a NOTIFY sent through DATABASE_URL (${pool}): TAGSCHED_DATABASE_SESSION_URL must be a session connection to the same database as DATABASE_URL (PostgreSQL itself, or PgBouncer in session mode), not a transaction pooler`
      : `a LISTEN on DATABASE_URL (${pool}) did not hear, within ${seconds} s, a NOTIFY sent on another of its connections: DATABASE_URL looks like a transaction pooler (PgBouncer in transaction mode); set TAGSCHED_DATABASE_SESSION_URL to a session connection to the same database (PostgreSQL itself, or PgBouncer in session mode)`,
  );
}
