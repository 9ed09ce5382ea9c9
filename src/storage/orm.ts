import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Migrator } from '@mikro-orm/migrations';
import { MikroORM, defineConfig, type Options } from '@mikro-orm/postgresql';
import pg from 'pg';
import { withSessionLock } from './db/advisory-locks.js';
import { entities } from './entities/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * TCP keepalives on every connection of the service to PostgreSQL (the ORM's pool, the event listener and
 * publisher, the session connection of the migration lock): a connection whose server went silent (its host
 * gone, a failover) is probed after 10 s without traffic, and found dead after the probes the OS then sends
 * (net.ipv4.tcp_keepalive_intvl and tcp_keepalive_probes), instead of after Linux's two hours of silence.
 */
export const PG_KEEPALIVE = { keepAlive: true, keepAliveInitialDelayMillis: 10_000 } as const;

/** Where the ORM connects: a URL for a real server, or host/port for the embedded one. */
export type DbTarget = { clientUrl: string } | { host: string; port: number; user: string; dbName: string };

/**
 * The MikroORM options for a database target: its pooled connections with TCP keepalives (PG_KEEPALIVE);
 * migrations live in `migrations/` at the repository root.
 */
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
    // knex hands `connection` to each pg client of the pool; the caller's driver options (its log) go with it.
    driverOptions: { ...over.driverOptions, connection: { ...over.driverOptions?.connection, ...PG_KEEPALIVE } },
  });
}

/** Opens the ORM (it does not migrate). */
export function createOrm(target: DbTarget, over: Partial<Options> = {}): Promise<MikroORM> {
  return MikroORM.init(ormOptions(target, over));
}

/** A connection of its own to `url` (a session: for LISTEN, a session advisory lock), with TCP keepalives; its caller ends it. */
export async function connectSession(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, ...PG_KEEPALIVE });
  await client.connect();
  return client;
}

/**
 * Runs pending migrations under a session advisory lock held on a session connection of its own (`lock`:
 * a URL it connects to and disconnects from, or a connection of the caller's), so that several processes
 * starting at once migrate one after the other instead of racing. The migrations themselves run on the
 * ORM's pool, each in one transaction (`transactional`), which a transaction pooler serves as well. The
 * embedded database serves one process only, so it needs no lock (and must not take one on its single
 * shared session).
 */
export async function migrate(orm: MikroORM, lock: string | pg.Client | null): Promise<string[]> {
  const up = async () => (await orm.migrator.up()).map((m) => m.name);
  if (!lock) return up();
  if (typeof lock !== 'string') return withSessionLock(lock, 'MIGRATE', up);
  const client = await connectSession(lock);
  try {
    return await withSessionLock(client, 'MIGRATE', up);
  } finally {
    await client.end();
  }
}
