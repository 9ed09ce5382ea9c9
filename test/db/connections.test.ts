/**
 * The service's connections to PostgreSQL: every one has TCP keepalives, first probe after 10 s of
 * silence (read from the kernel's table of this machine's TCP sockets: a keepalive timer armed, and
 * when it fires), and the ORM's pool holds at most TAGSCHED_DATABASE_POOL_SIZE of them; a transaction
 * left idle on the pool (a paused process) is ended by the server, its locks freed.
 */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config/config.js';
import { idleTransactionTimeout, openDatabase } from '../../src/server/database.js';
import { createLogger } from '../../src/core/log.js';
import { connectSession } from '../../src/storage/orm.js';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();
const linux = fs.existsSync('/proc/net/tcp');

/**
 * The keepalive timer of this machine's end of a TCP connection from local `port` to 127.0.0.1: the
 * seconds until it fires, or null when no keepalive timer is armed. /proc/net/tcp's `tr` is 2 for it,
 * `tm->when` in clock ticks (USER_HZ, 100 a second); while a segment waits for its acknowledgement
 * (`tr` 1: the app's own background queries) the table shows that timer instead, so it is read again,
 * for up to 2 s, until the connection is quiet.
 */
async function keepaliveSeconds(port: number): Promise<number | null> {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (let attempt = 0; attempt < 20; attempt++) {
    const line = fs
      .readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .find((f) => f[1] === local && f[3] === '01'); // ESTABLISHED
    if (!line) throw new Error(`no established TCP socket from port ${port}`);
    const [timer, when] = line[5]!.split(':');
    if (timer === '02') return parseInt(when!, 16) / 100;
    if (timer === '00') return null;
    await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

/** The client ports and last statements of this database's other sessions (the app's connections), once they are idle. */
async function sessions(): Promise<{ port: number; query: string }[]> {
  const rows = await t.sql<{ port: number; query: string }>(
    `select client_port as port, query from pg_stat_activity
      where datname = current_database() and client_addr = '127.0.0.1' and pid <> pg_backend_pid()`,
  );
  await new Promise((r) => setTimeout(r, 300)); // the last segments acknowledged: only the keepalive timer is left
  return rows;
}

describe("the service's connections", () => {
  it.skipIf(!linux)(
    'the pool, the event listener and the event publisher: TCP keepalives, first probe within 10 s',
    async () => {
      // The listener LISTENs and the publisher connects when there is something to listen to and publish.
      const stream = t.app.events.subscribe('workerChanged')[Symbol.asyncIterator]();
      const next = stream.next();
      await t.app.events.listening!();
      t.app.events.publish('workerChanged', { id: 1, name: 'w' });
      await next;
      // Several pooled connections at once.
      await Promise.all([1, 2, 3].map(() => t.sql('select pg_sleep(0.05)')));
      const seen = await sessions();
      expect(seen.some((s) => /^LISTEN /.test(s.query))).toBe(true);
      expect(seen.some((s) => /pg_notify/.test(s.query))).toBe(true);
      expect(seen.filter((s) => /pg_sleep/.test(s.query)).length).toBeGreaterThanOrEqual(2);
      for (const s of seen) {
        const seconds = await keepaliveSeconds(s.port);
        expect(seconds, `${s.query}: no keepalive timer`).not.toBeNull();
        expect(seconds!, s.query).toBeLessThanOrEqual(10);
      }
      await stream.return?.();
    },
  );

  it.skipIf(!linux)('the session connection (the migration lock, the start-up check): the same', async () => {
    const session = await connectSession(t.dbUrl);
    try {
      const [{ port }] = (
        await session.query<{ port: number }>(
          'select client_port as port from pg_stat_activity where pid = pg_backend_pid()',
        )
      ).rows;
      await new Promise((r) => setTimeout(r, 300));
      const seconds = await keepaliveSeconds(port);
      expect(seconds).not.toBeNull();
      expect(seconds!).toBeLessThanOrEqual(10);
    } finally {
      await session.end();
    }
  });

  it('the pool holds TAGSCHED_DATABASE_POOL_SIZE connections at most', async () => {
    const config = loadConfig({ DATABASE_URL: t.dbUrl, TAGSCHED_DATABASE_POOL_SIZE: '3' });
    expect(config.server.databasePoolSize).toBe(3);
    const { orm } = await openDatabase(config.server, createLogger('silent'));
    try {
      const rows = await Promise.all(
        Array.from({ length: 8 }, () =>
          orm.em.getConnection().execute<{ pid: number }[]>('select pg_backend_pid() as pid, pg_sleep(0.1)'),
        ),
      );
      expect(new Set(rows.map(([r]) => r!.pid)).size).toBe(3);
    } finally {
      await orm.close(true);
    }
  });
});

describe('a transaction left idle by a stopped process', () => {
  it('is ended by PostgreSQL after TAGSCHED_DATABASE_IDLE_TRANSACTION_TIMEOUT_SECONDS, and its row locks with it', async () => {
    const config = loadConfig({ DATABASE_URL: t.dbUrl, TAGSCHED_DATABASE_IDLE_TRANSACTION_TIMEOUT_SECONDS: '1' });
    expect(config.server.databaseIdleTransactionTimeoutMs).toBe(1000);
    const { orm } = await openDatabase(config.server, createLogger('silent'));
    const other = await connectSession(t.dbUrl);
    try {
      const [{ setting }] = await orm.em
        .getConnection()
        .execute<{ setting: string }[]>(`select current_setting('idle_in_transaction_session_timeout') as setting`);
      expect(setting).toBe('1s');
      // A lock held by the pool's connection in a transaction that then goes quiet, as a paused process's would.
      await t.sql(`create table if not exists idle_lock_probe (id int primary key)`);
      await t.sql(`insert into idle_lock_probe values (1) on conflict do nothing`);
      const held = orm.em.fork().transactional(async (tx) => {
        await tx.execute(`select id from idle_lock_probe where id = 1 for update`);
        await new Promise((r) => setTimeout(r, 3000));
        await tx.execute(`select 1`);
      });
      const outcome = held.then(
        () => 'committed',
        (err: unknown) => String(err),
      );
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      await other.query(`set lock_timeout = '10s'`);
      await other.query(`begin`);
      await other.query(`select id from idle_lock_probe where id = 1 for update`);
      const waited = Date.now() - started;
      await other.query(`rollback`);
      // The lock came free when the server ended the idle session (about 1 s), long before the 3 s pause ended.
      expect(waited).toBeLessThan(2900);
      expect(await outcome).not.toBe('committed');
    } finally {
      await other.end();
      await orm.close(true);
    }
  });

  it('is not asked of a transaction pooler (a session URL set), nor with 0', () => {
    const pooled = loadConfig({
      DATABASE_URL: 'postgres://root@127.0.0.1:6432/x',
      TAGSCHED_DATABASE_SESSION_URL: 'postgres://root@127.0.0.1:5432/x',
    });
    expect(idleTransactionTimeout(pooled.server)).toBeNull();
    const direct = loadConfig({ DATABASE_URL: 'postgres://root@127.0.0.1:5432/x' });
    expect(idleTransactionTimeout(direct.server)).toBe(10_000);
    const off = loadConfig({
      DATABASE_URL: 'postgres://root@127.0.0.1:5432/x',
      TAGSCHED_DATABASE_IDLE_TRANSACTION_TIMEOUT_SECONDS: '0',
    });
    expect(idleTransactionTimeout(off.server)).toBeNull();
    expect(idleTransactionTimeout(loadConfig({}).server)).toBeNull();
  });
});

describe('the database settings', () => {
  it.each([
    [
      { TAGSCHED_DATABASE_POOL_SIZE: '0' },
      /^TAGSCHED_DATABASE_POOL_SIZE must be a whole number from 1 to 1000, got "0"$/,
    ],
    [{ TAGSCHED_DATABASE_POOL_SIZE: '1001' }, /^TAGSCHED_DATABASE_POOL_SIZE must be a whole number from 1 to 1000/],
    [{ TAGSCHED_DATABASE_POOL_SIZE: '2.5' }, /^TAGSCHED_DATABASE_POOL_SIZE must be a whole number from 1 to 1000/],
    [{ TAGSCHED_DATABASE_POOL_SIZE: 'ten' }, /^TAGSCHED_DATABASE_POOL_SIZE must be a non-negative number, got "ten"$/],
    [
      { TAGSCHED_DATABASE_IDLE_TRANSACTION_TIMEOUT_SECONDS: '3601' },
      /^TAGSCHED_DATABASE_IDLE_TRANSACTION_TIMEOUT_SECONDS must be a whole number from 0 to 3600/,
    ],
    [{ TAGSCHED_PULL_LOCK_TIMEOUT_MS: '-1' }, /^TAGSCHED_PULL_LOCK_TIMEOUT_MS must be a non-negative number/],
    [
      { TAGSCHED_DATABASE_SESSION_URL: 'postgres://root@127.0.0.1/x' },
      /^TAGSCHED_DATABASE_SESSION_URL is set without DATABASE_URL/,
    ],
  ])('%o is refused, saying why', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('defaults: a pool of 10, the session URL is DATABASE_URL, pulls wait 5 s for a lock', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://root@127.0.0.1/x' });
    expect(config.server).toMatchObject({ databasePoolSize: 10, databaseSessionUrl: null });
    expect(config.workers.pullLockTimeoutMs).toBe(5000);
    const set = loadConfig({
      DATABASE_URL: 'postgres://root@127.0.0.1:6432/x',
      TAGSCHED_DATABASE_SESSION_URL: 'postgres://root@127.0.0.1:5432/x',
      TAGSCHED_DATABASE_POOL_SIZE: '40',
      TAGSCHED_PULL_LOCK_TIMEOUT_MS: '0',
    });
    expect(set.server).toMatchObject({ databasePoolSize: 40, databaseSessionUrl: 'postgres://root@127.0.0.1:5432/x' });
    expect(set.workers.pullLockTimeoutMs).toBe(0);
  });
});
