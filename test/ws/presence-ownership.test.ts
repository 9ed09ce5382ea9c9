/**
 * A worker is owned by the process holding its WebSocket (worker.connected_process_id): when its agent
 * reconnects to another process (a load balancer moving it), the first process's socket closing, and
 * that process stopping, leave it connected, owned by the other one. Two apps on one database, A and B,
 * besides the harness's; real WebSocket clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/server/app.js';
import { createLogger } from '../../src/core/log.js';
import { until } from '../faults/harness.js';
import { secondAppConfig, useTestApp } from '../helpers/app.js';
import { registerWorker } from '../helpers/fixtures.js';
import { wsClient } from '../helpers/ws.js';

const t = useTestApp();
const apps: App[] = [];
const clients: { dispose(): void | Promise<void> }[] = [];

/** A server process of its own on the harness's database, started; its GraphQL URL. */
async function startApp(): Promise<{ app: App; url: string }> {
  const app = await buildApp(secondAppConfig(t, { scheduler: { automatic: false } }), {
    log: createLogger('silent'),
  });
  apps.push(app);
  const { url } = await app.start();
  return { app, url };
}

afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  for (const app of apps) await app.stop().catch(() => undefined);
});

const presence = async (name: string) =>
  (
    await t.sql<{ connected: boolean; process: number | null }>(
      `select connected_at is not null as connected, connected_process_id as process from worker where name = ?`,
      [name],
    )
  )[0];

function connect(url: string, token: string) {
  const { client } = wsClient(url, token);
  clients.push(client);
  return client;
}

/** Long enough for a process's presence write (a few milliseconds) to land if it were going to. */
const settle = () => new Promise((r) => setTimeout(r, 500));

let a: { app: App; url: string };
let b: { app: App; url: string };
beforeAll(async () => {
  a = await startApp();
  b = await startApp();
});

describe('worker ownership', () => {
  it('a connection marks its worker owned by the process that holds it', async () => {
    expect(a.app.processId).not.toBe(b.app.processId);
    const token = await registerWorker(t, 'owned');
    const client = connect(a.url, token);
    await until('owned to be connected through A', async () => (await presence('owned')).process === a.app.processId);
    await client.dispose();
    await until('owned to be disconnected', async () => !(await presence('owned')).connected);
    expect(await presence('owned')).toEqual({ connected: false, process: null });
  });

  it('a worker whose socket moved to B stays connected when its socket on A closes', async () => {
    const token = await registerWorker(t, 'moved');
    const onA = connect(a.url, token);
    await until('moved to be connected through A', async () => (await presence('moved')).process === a.app.processId);
    connect(b.url, token);
    await until('moved to be connected through B', async () => (await presence('moved')).process === b.app.processId);
    await onA.dispose();
    await settle();
    expect(await presence('moved')).toEqual({ connected: true, process: b.app.processId });
  });

  it('a worker that reconnected to B is not disconnected by A’s stop, while A’s own workers are', async () => {
    const token = await registerWorker(t, 'leaving-a');
    const stays = await registerWorker(t, 'stays-on-a');
    connect(a.url, token);
    connect(a.url, stays);
    await until(
      'both to be connected through A',
      async () =>
        (await presence('leaving-a')).process === a.app.processId &&
        (await presence('stays-on-a')).process === a.app.processId,
    );
    connect(b.url, token);
    await until(
      'leaving-a to be connected through B',
      async () => (await presence('leaving-a')).process === b.app.processId,
    );
    // A still holds its first socket when it stops.
    apps.splice(apps.indexOf(a.app), 1);
    await a.app.stop();
    expect(await presence('leaving-a')).toEqual({ connected: true, process: b.app.processId });
    expect(await presence('stays-on-a')).toEqual({ connected: false, process: null });
    const [row] = await t.sql<{ stopped: boolean }>(
      `select stopped_at is not null as stopped from server_process where id = ?`,
      [a.app.processId],
    );
    expect(row).toEqual({ stopped: true });
  });
});
