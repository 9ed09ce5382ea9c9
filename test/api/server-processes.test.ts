/**
 * Query.serverProcesses: the process registry as admins see it (services/processes/registry.ts). Each
 * app registers itself when it is built and writes its heartbeat while it runs; a stopped one is listed
 * stopped, not alive. Anyone else is refused, as for the other admin queries.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/server/app.js';
import { createLogger } from '../../src/core/log.js';
import { until } from '../faults/harness.js';
import { startSecondApp, useTestApp } from '../helpers/app.js';
import { createUser, registerWorker } from '../helpers/fixtures.js';

const t = useTestApp();
let b: App | null = null;
beforeAll(async () => {
  await t.app.start();
  b = await startSecondApp(
    t,
    { scheduler: { automatic: false }, server: { processHeartbeatMs: 100, processTimeoutMs: 60_000 } },
    { log: createLogger('silent') },
  );
});
afterAll(async () => {
  await b?.stop();
});

const QUERY = `{ serverProcesses { name host pid startedAt heartbeatAt stoppedAt alive } }`;
const listed = async () => {
  const r = await t.gql(QUERY);
  expect(r.errors).toBeUndefined();
  return r.data!.serverProcesses as {
    name: string;
    host: string;
    pid: number;
    startedAt: string;
    heartbeatAt: string;
    stoppedAt: string | null;
    alive: boolean;
  }[];
};
const byName = async (name: string) => (await listed()).find((p) => p.name === name);

describe('Query.serverProcesses', () => {
  it('lists every process of the database to an admin, by name: its host, pid, start and heartbeat, alive', async () => {
    const all = await listed();
    expect(all.map((p) => p.name)).toEqual([...all.map((p) => p.name)].sort());
    const a = t.app.config.server;
    expect(await byName(a.processName)).toMatchObject({
      host: a.hostName,
      pid: process.pid,
      stoppedAt: null,
      alive: true,
    });
    expect(await byName(b!.config.server.processName)).toMatchObject({ stoppedAt: null, alive: true });
  });

  it('a running process’s heartbeat moves on; a stopped one is listed stopped, not alive', async () => {
    const name = b!.config.server.processName;
    const before = (await byName(name))!;
    await until('its heartbeat to move on', async () => (await byName(name))!.heartbeatAt > before.heartbeatAt);
    await b!.stop();
    b = null;
    const stopped = (await byName(name))!;
    expect(stopped.alive).toBe(false);
    expect(stopped.stoppedAt).not.toBeNull();
    expect(Date.parse(stopped.stoppedAt!)).toBeGreaterThanOrEqual(Date.parse(stopped.startedAt));
  });

  it('is refused without a token, and to a worker and a user who is not an admin, as other admin queries are', async () => {
    const worker = await registerWorker(t, 'curious');
    const user = await createUser(t, 'plain');
    const anonymous = await t.gql(QUERY, {}, null);
    expect(anonymous.data ?? null).toBeNull();
    expect(anonymous.errors?.[0].extensions?.code).toBe('UNAUTHENTICATED');
    for (const token of [worker, user]) {
      const refused = await t.gql(QUERY, {}, token);
      const users = await t.gql(`{ users { edges { node { username } } } }`, {}, token);
      expect(refused.data ?? null).toBeNull();
      expect(refused.errors?.[0].extensions?.code).toBe('FORBIDDEN');
      expect(refused.errors?.[0].message).toBe(users.errors?.[0].message);
      expect(refused.status).toBe(users.status);
    }
    expect(anonymous.status).toBe((await t.gql(`{ users { edges { node { username } } } }`, {}, null)).status);
  });
});
