/**
 * The session URL (TAGSCHED_DATABASE_SESSION_URL): LISTEN and the migration lock use it, the rest the
 * pool's DATABASE_URL. Start-up checks that a LISTEN on it hears a NOTIFY sent through the pool, and
 * refuses, in one line, before it writes anything, when it does not: as through a transaction pooler,
 * or (what this test can set up) when the session URL names another database, whose LISTEN hears
 * nothing of this one's NOTIFY.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/core/config/config.js';
import { createLogger } from '../../src/core/log.js';
import { describeStartupError } from '../../src/server/startup-errors.js';
import { openDatabase, SESSION_CHECK_MS } from '../../src/server/database.js';
import { createTestDatabase } from '../helpers/db.js';
import { adminUrl, databaseUrl } from '../helpers/pg-url.js';
import { runServerToExit } from '../helpers/server-process.js';

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl() });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** The tables of a database (its `public` schema). */
async function tablesOf(url: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ t: string }>(`select tablename as t from pg_tables where schemaname = 'public'`)).rows.map(
      (r) => r.t,
    );
  } finally {
    await c.end();
  }
}

/** A URL of `url`'s database with a password in it, which must never be shown (trust authentication ignores it). */
const withPassword = (url: string) => {
  const u = new URL(url);
  u.password = 'hunter2secret';
  return u.toString();
};

// An empty database (no migration yet: a start that went on would create tables) and a second database.
const empty = `t_${inject('runId')}_${randomBytes(4).toString('hex')}`;
let other: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Awaited<ReturnType<typeof createTestDatabase>>;
beforeAll(async () => {
  await admin(`create database "${empty}"`);
  other = await createTestDatabase();
  db = await createTestDatabase();
});
afterAll(async () => {
  await admin(`drop database if exists "${empty}" with (force)`);
  await other?.drop();
  await db?.drop();
});

describe('the start-up check of the session URL', () => {
  it('a session URL whose LISTEN does not hear the pool: one line naming TAGSCHED_DATABASE_SESSION_URL, exit 2, nothing written', async () => {
    const started = Date.now();
    const run = await runServerToExit({
      DATABASE_URL: withPassword(databaseUrl(empty)),
      TAGSCHED_DATABASE_SESSION_URL: withPassword(other.url),
      TAGSCHED_ADMIN_TOKEN: 'tsk_admin_session-url-test-0123456789abcdef',
    });
    expect(run.code).toBe(2);
    const lines = run.stderr.trim().split('\n');
    expect(lines, run.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^tagsched: a LISTEN on TAGSCHED_DATABASE_SESSION_URL \(postgres:\/\/root:\*\*\*@127\.0\.0\.1:5432\/t_\w+\) did not hear, within 5 s, a NOTIFY sent through DATABASE_URL .*: TAGSCHED_DATABASE_SESSION_URL must be a session connection to the same database as DATABASE_URL \(PostgreSQL itself, or PgBouncer in session mode\), not a transaction pooler$/,
    );
    expect(run.stderr + run.stdout).not.toContain('hunter2secret');
    expect(run.stdout).not.toMatch(/database migrated|listening/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(SESSION_CHECK_MS);
    // Refused before the migrations: the pool's database is as empty as it was.
    expect(await tablesOf(databaseUrl(empty))).toEqual([]);
  }, 120_000);

  it('a session URL that cannot be reached: the line names it and TAGSCHED_DATABASE_SESSION_URL', async () => {
    const config = loadConfig({
      DATABASE_URL: db.url,
      TAGSCHED_DATABASE_SESSION_URL: 'postgres://root:hunter2secret@127.0.0.1:1/x',
    });
    const err = await openDatabase(config.server, createLogger('silent')).then(
      () => null,
      (e: unknown) => e,
    );
    expect(describeStartupError(err, config.server)).toBe(
      'cannot reach the database at postgres://root:***@127.0.0.1:1/x (ECONNREFUSED): check TAGSCHED_DATABASE_SESSION_URL and that PostgreSQL is running',
    );
  });

  it('LISTEN goes on the session URL, NOTIFY on the pool URL, and events cross processes', async () => {
    // Two URLs of the same database, told apart in pg_stat_activity by their application names.
    const named = (name: string) => `${db.url}?application_name=${name}`;
    const configOf = (processName: string) =>
      loadConfig(
        {},
        {
          server: {
            databaseUrl: named('tagsched-pool'),
            databaseSessionUrl: named('tagsched-session'),
            dataDir: '/tmp/tagsched-test',
            port: 0,
            host: '127.0.0.1',
            secretKey: 'test-secret-key',
            processName,
          },
          scheduler: { automatic: false },
          provisioner: { enabled: false },
          serverWorkers: { count: 0 },
        },
      );
    const a = await buildApp(configOf('session-a'), { log: createLogger('silent') });
    const b = await buildApp(configOf('session-b'), { log: createLogger('silent') });
    try {
      const stream = b.events.subscribe('workAssigned', '42')[Symbol.asyncIterator]();
      const next = stream.next();
      await b.events.listening!();
      a.events.publish('workAssigned', '42', { workRequestId: 7, workerId: 42 });
      expect((await next).value).toEqual({ workRequestId: 7, workerId: 42 });
      await stream.return?.();
      const sessions = await a.orm.em.getConnection().execute<{ name: string; query: string }[]>(
        `select application_name as name, query from pg_stat_activity
            where datname = current_database() and application_name like 'tagsched-%'`,
      );
      const listens = sessions.filter((s) => /^(UN)?LISTEN /.test(s.query));
      const notifies = sessions.filter((s) => /pg_notify/.test(s.query));
      expect(listens.length).toBeGreaterThanOrEqual(2); // one listener per app
      expect(notifies.length).toBeGreaterThanOrEqual(1);
      expect(new Set(listens.map((s) => s.name))).toEqual(new Set(['tagsched-session']));
      expect(new Set(notifies.map((s) => s.name))).toEqual(new Set(['tagsched-pool']));
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});
