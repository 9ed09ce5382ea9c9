/**
 * A server that stops while an HTTP request is still looking its token up (held by PostgreSQL itself:
 * a lock on the token table, released once the stop began) ends that request, cut or answered, and
 * closes its database without an unexpected error logged.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import { secondAppConfig, useTestApp } from '../helpers/app.js';
import { registerWorker } from '../helpers/fixtures.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';
import { until } from '../faults/harness.js';

const t = useTestApp();

describe('a stopping server', () => {
  it('waits for an HTTP request still looking its token up', async () => {
    const token = await registerWorker(t, 'late-beat');
    const capture = captureLog('info');
    const app = await buildApp(secondAppConfig(t), { log: capture.log });
    const { url } = await app.start();
    const locker = new pg.Client({ connectionString: t.dbUrl });
    await locker.connect();
    let released = false;
    try {
      await locker.query('begin');
      await locker.query('lock table token in access exclusive mode');
      const beat = fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: 'mutation { heartbeat(input: {}) { __typename } }' }),
      }).then(
        (r) => r.status,
        () => 'cut' as const,
      );
      await until(
        'the token lookup to wait for the lock',
        async () =>
          (
            await locker.query(
              `select count(*)::int as n from pg_locks where not granted and relation = 'token'::regclass`,
            )
          ).rows[0].n > 0,
        30_000,
        20,
      );
      const stopped = app.stop();
      await new Promise((r) => setTimeout(r, 300));
      await locker.query('commit');
      released = true;
      await stopped;
      expect(['cut', 200]).toContain(await beat);
    } finally {
      if (!released) await locker.query('rollback').catch(() => undefined);
      await locker.end();
    }
    const errors = capture
      .textSince(0)
      .split('\n')
      .filter((line) => line && JSON.parse(line).level >= LEVEL.error);
    expect(errors).toEqual([]);
  }, 90_000);
});
