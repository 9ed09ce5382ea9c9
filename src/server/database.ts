import type { MikroORM } from '@mikro-orm/postgresql';
import type { ServerConfig } from '../core/config/server.js';
import { startEmbeddedPg, type EmbeddedPg } from './embedded-pg.js';
import type { Logger } from '../core/log.js';
import { ormLogging } from '../api/log-adapters.js';
import { createOrm, migrate, type DbTarget } from '../storage/orm.js';

/** An open, migrated database: the ORM, the embedded server when there is no URL, and the migrations applied. */
export interface OpenDatabase {
  readonly orm: MikroORM;
  readonly embedded: EmbeddedPg | null;
  /** Every migration there is now (what /readyz checks is still applied). */
  readonly migrations: readonly string[];
}

/** Opens the database (embedded when no URL) and migrates it. */
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
  const orm = await createOrm(target, {
    pool: embedded ? { min: 0, max: 1 } : { min: 0, max: 10 },
    ...ormLogging(log),
  });
  const applied = await migrate(orm, config.databaseUrl);
  if (applied.length) log.info({ migrations: applied }, 'database migrated');
  // What /readyz checks is still applied: every migration there is now.
  const migrations = (await orm.migrator.getExecutedMigrations()).map((m) => m.name);
  return { orm, embedded, migrations };
}
