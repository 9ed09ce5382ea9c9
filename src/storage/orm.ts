import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Migrator } from '@mikro-orm/migrations';
import { MikroORM, defineConfig, type Options } from '@mikro-orm/postgresql';
import pg from 'pg';
import { withSessionLock } from './db/advisory-locks.js';
import { entities } from './entities/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Where the ORM connects: a URL for a real server, or host/port for the embedded one. */
export type DbTarget = { clientUrl: string } | { host: string; port: number; user: string; dbName: string };

/** The MikroORM options for a database target; migrations live in `migrations/` at the repository root. */
export function ormOptions(target: DbTarget, over: Partial<Options> = {}): Options {
  return defineConfig({
    ...target,
    entities,
    extensions: [Migrator],
    migrations: {
      path: path.join(root, 'migrations'),
      pathTs: path.join(root, 'migrations'),
      glob: '!(*.d).{js,ts}',
      transactional: true,
      allOrNothing: true,
      snapshot: false,
      emit: 'ts',
    },
    // Debug output goes through our own logger only when asked.
    debug: false,
    ...over,
  });
}

/** Opens the ORM (it does not migrate). */
export function createOrm(target: DbTarget, over: Partial<Options> = {}): Promise<MikroORM> {
  return MikroORM.init(ormOptions(target, over));
}

/**
 * Runs pending migrations under a session advisory lock held on a dedicated connection, so that
 * several processes starting at once migrate one after the other instead of racing.
 * The embedded database serves one process only, so it needs no lock (and must not take one on
 * its single shared session).
 */
export async function migrate(orm: MikroORM, lockUrl: string | null): Promise<string[]> {
  if (!lockUrl) return (await orm.migrator.up()).map((m) => m.name);
  const client = new pg.Client({ connectionString: lockUrl });
  await client.connect();
  try {
    return await withSessionLock(client, 'MIGRATE', async () => (await orm.migrator.up()).map((m) => m.name));
  } finally {
    await client.end();
  }
}
