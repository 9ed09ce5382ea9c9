import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { register } from 'tsx/esm/api';
import type { TestProject } from 'vitest/node';
import { adminUrl, databaseUrl } from './helpers/pg-url.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDb: string;
    runId: string;
  }
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Builds a migrated template database once per set of migrations (named by their hash); every test
 * file clones its own database from it in a few tens of milliseconds.
 */
export default async function setup(project: TestProject) {
  const dir = path.resolve('migrations');
  const hash = createHash('sha1');
  for (const f of fs.readdirSync(dir).sort()) hash.update(f).update(fs.readFileSync(path.join(dir, f)));
  const templateDb = `tpl_${hash.digest('hex').slice(0, 12)}`;
  const runId = `${process.pid}`;
  // Several test runs may share one PostgreSQL server (CI, and several checkouts on one machine): the
  // template is built under a session advisory lock so that two runs never build the same one at once.
  const lock = new pg.Client({ connectionString: adminUrl() });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock(hashtext($1))', [templateDb]);
    await buildTemplate(templateDb);
  } finally {
    await lock.end();
  }
  project.provide('templateDb', templateDb);
  project.provide('runId', runId);
  return async () => {
    await admin(async (c) => {
      const { rows } = await c.query<{ datname: string }>(`select datname from pg_database where datname like $1`, [
        `t\\_${runId}\\_%`,
      ]);
      for (const r of rows) await c.query(`drop database if exists "${r.datname}" with (force)`);
    });
  };
}

/** Migrates a new database and turns it into the template, unless a finished template of that name exists. */
async function buildTemplate(templateDb: string): Promise<void> {
  const exists = await admin(
    async (c) => (await c.query('select 1 from pg_database where datname = $1', [templateDb])).rowCount,
  );
  if (!exists) {
    const building = `${templateDb}_building`;
    await admin(async (c) => {
      await c.query(`drop database if exists "${building}" with (force)`);
      await c.query(`create database "${building}"`);
    });
    // globalSetup is not transformed by vite: the ORM's import() of migrations/*.ts needs tsx.
    const unregister = register();
    const { createOrm, migrate } = await import('../src/storage/orm.js');
    const orm = await createOrm({ clientUrl: databaseUrl(building) });
    await migrate(orm, databaseUrl(building));
    await orm.close(true);
    await unregister();
    await admin(async (c) => {
      await c.query(`alter database "${building}" rename to "${templateDb}"`);
      await c.query(`alter database "${templateDb}" with is_template true allow_connections false`);
    });
  }
}
