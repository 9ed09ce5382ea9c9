/**
 * A process that comes back from a silence (paused, or cut off from the database) after the chores
 * leader took its workers over (services/processes/registry.ts): its next heartbeat sees the lapse, and
 * the workers whose WebSockets it still holds are connected and owned by it again, so their agents get
 * work without waiting for their next call. A worker that connected to another process meanwhile stays
 * that process's.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../faults/harness.js';
import { useTestApp } from '../helpers/app.js';
import { NOOP_METADATA, registerWorker, reportMetadata } from '../helpers/fixtures.js';
import { wsClient } from '../helpers/ws.js';

// A heartbeat every 250 ms; a timeout no real beat misses in a test.
const t = useTestApp({ server: { processHeartbeatMs: 250, processTimeoutMs: 60_000 } });
let aUrl: string;
const clients: { dispose(): void | Promise<void> }[] = [];

beforeAll(async () => {
  ({ url: aUrl } = await t.app.start());
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
});

const workerRow = async (name: string) =>
  (
    await t.sql<{ connected: boolean; process: number | null }>(
      `select connected_at is not null as connected, connected_process_id as process from worker where name = ?`,
      [name],
    )
  )[0]!;

async function connectedToA(name: string): Promise<string> {
  const token = await registerWorker(t, name);
  const { client } = wsClient(aUrl, token);
  clients.push(client);
  await until(`${name} to be connected through A`, async () => (await workerRow(name)).process === t.app.processId);
  await reportMetadata(t, token, NOOP_METADATA);
  return token;
}

describe('a process back from a silence', () => {
  it('takes back the workers it still holds that a take-over marked disconnected, not one connected elsewhere', async () => {
    await connectedToA('back-here');
    await connectedToA('went-away');
    const [{ id: elsewhere }] = await t.sql<{ id: number }>(
      `insert into server_process (name, host, pid, started_at, heartbeat_at) values ('elsewhere', 'h', 1, now(), now()) returning id`,
    );

    // What a take-over writes, in one transaction holding A's registry row (as the take-over locks it
    // first): A's next beat waits for it, then finds its previous beat an hour old. 'went-away' has
    // meanwhile connected to another process.
    const raw = new pg.Client({ connectionString: t.dbUrl });
    await raw.connect();
    try {
      await raw.query('begin');
      await raw.query(`update server_process set heartbeat_at = now() - interval '1 hour' where id = $1`, [
        t.app.processId,
      ]);
      await raw.query(
        `update worker set connected_at = null, connected_process_id = null where name in ('back-here', 'went-away')`,
      );
      await raw.query(`update worker set connected_at = now(), connected_process_id = $1 where name = 'went-away'`, [
        elsewhere,
      ]);
      await raw.query('commit');
    } finally {
      await raw.end();
    }

    await until(
      'back-here to be connected through A again',
      async () => (await workerRow('back-here')).process === t.app.processId,
      5_000,
    );
    expect(await workerRow('back-here')).toEqual({ connected: true, process: t.app.processId });
    // Several beats later, the other process's worker is still its own.
    await new Promise((r) => setTimeout(r, 750));
    expect(await workerRow('went-away')).toEqual({ connected: true, process: elsewhere });
    // A's heartbeat is current again.
    const [{ fresh }] = await t.sql<{ fresh: boolean }>(
      `select heartbeat_at > now() - interval '10 seconds' as fresh from server_process where id = ?`,
      [t.app.processId],
    );
    expect(fresh).toBe(true);
  });
});
