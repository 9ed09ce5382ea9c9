/**
 * A WebSocket whose init the server cannot complete because its database failed is told to try again
 * later (1013, which graphql-ws clients retry by themselves), not closed with graphql-ws's internal
 * error (4500, with a stack printed on stderr). And a worker's connection that is not acknowledged (its
 * "connected" failed, or it closed while that was being written) is not counted as one of the
 * worker's: its end is recorded as a disconnection. The failures and delays are PostgreSQL's own: a
 * trigger refuses, or slows down, the statement that records the worker connected.
 */
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import pg from 'pg';
import { useTestApp } from '../helpers/app.js';
import { registerWorker } from '../helpers/fixtures.js';
import { initSocket, wsClient } from '../helpers/ws.js';
import { until } from '../faults/harness.js';

// One connection per token: a connection counted against its token and never released would refuse the next.
const t = useTestApp({ limits: { authFailuresPerMinute: 0, maxConnectionsPerToken: 1 } });
let url: string;
beforeAll(async () => {
  ({ url } = await t.app.start());
  await t.sql(
    `create function refuse_connected() returns trigger language plpgsql as $$ begin raise exception 'refused by the test'; end $$`,
  );
  await t.sql(
    `create function slow_connected() returns trigger language plpgsql as $$ begin perform pg_sleep(1.5); return new; end $$`,
  );
});
afterEach(() => vi.restoreAllMocks());

const presence = async (name: string) =>
  (
    await t.sql<{ connected: boolean; seen: boolean }>(
      `select connected_at is not null as connected, last_seen_at is not null as seen from worker where name = ?`,
      [name],
    )
  )[0];

/**
 * The worker connects and goes away: connected, then disconnected. The disconnection is recorded only
 * if no earlier connection of the worker is still counted in the server process.
 */
async function connectsAndLeaves(name: string, token: string): Promise<void> {
  const { client } = wsClient(url, token);
  await until(`${name} to be connected`, async () => (await presence(name)).connected, 30_000, 50);
  await client.dispose();
  await until(`${name}'s disconnection to be recorded`, async () => !(await presence(name)).connected, 30_000, 50);
}

describe('a worker connection that is not acknowledged', () => {
  it('is told to try again later when the database refuses its "connected", and is not counted as the worker’s', async () => {
    const token = await registerWorker(t, 'unrecorded');
    const printed = vi.spyOn(console, 'error');
    await t.sql(
      `create trigger refuse_connected before update of connected_at on worker for each row
       when (old.name = 'unrecorded' and new.connected_at is not null) execute function refuse_connected()`,
    );

    const refused = wsClient(url, token);
    expect(await refused.closed).toEqual({
      code: 1013,
      reason: 'Try again later: the server could not reach its database',
    });
    expect(printed).not.toHaveBeenCalled();
    expect((await presence('unrecorded')).connected).toBe(false);

    await t.sql(`drop trigger refuse_connected on worker`);
    await connectsAndLeaves('unrecorded', token);
  }, 90_000);

  it('that closes while its token is looked up is not counted as the worker’s', async () => {
    const token = await registerWorker(t, 'gone-early');
    // The server's token lookup waits for this lock while the client goes away.
    const locker = new pg.Client({ connectionString: t.dbUrl });
    await locker.connect();
    try {
      await locker.query('begin');
      await locker.query('lock table token in access exclusive mode');
      const { socket } = await initSocket(url, token);
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
      await new Promise<void>((resolve) => {
        socket.once('close', () => resolve());
        socket.close();
      });
      await new Promise((r) => setTimeout(r, 200)); // the server's side of the close
    } finally {
      await locker.query('commit');
      await locker.end();
    }
    // The worker connects again (refused if the first connection still held its token's one place) and
    // goes away: that end is recorded only if the first connection was not counted as one of the worker's.
    await connectsAndLeaves('gone-early', token);
  }, 90_000);

  it('that closes while its "connected" is written has its end recorded', async () => {
    const token = await registerWorker(t, 'hasty');
    await t.sql(
      `create trigger slow_connected before update of connected_at on worker for each row
       when (old.name = 'hasty' and new.connected_at is not null) execute function slow_connected()`,
    );
    try {
      const { socket } = await initSocket(url, token);
      // Gone before the server could acknowledge it: its "connected" is still being written.
      await new Promise((r) => setTimeout(r, 300));
      socket.close();
      // The "connected" lands (the worker seen), and then its end is recorded.
      await until(
        'the worker seen and not connected',
        async () => {
          const p = await presence('hasty');
          return p.seen && !p.connected;
        },
        30_000,
        50,
      );
    } finally {
      await t.sql(`drop trigger slow_connected on worker`);
    }
  }, 90_000);
});
