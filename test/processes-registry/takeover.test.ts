/**
 * The process registry's take-over (services/processes/registry.ts): two apps on one database, workers
 * connected through app A by real WebSockets; A's heartbeat is then made old (A writes none during the
 * test: its period is an hour), as if A had died, and B takes over. Rows silent for a week are deleted,
 * with the server workers named after them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/server/app.js';
import { createLogger } from '../../src/core/log.js';
import { takeOverDeadProcesses } from '../../src/services/processes/registry.js';
import { serverWorkerName } from '../../src/services/processes/server-worker-names.js';
import { until } from '../faults/harness.js';
import { startSecondApp, useTestApp } from '../helpers/app.js';
import { createWorkspace, NOOP_METADATA, registerWorker, reportMetadata, submitOk } from '../helpers/fixtures.js';
import { wsClient } from '../helpers/ws.js';

const HOUR_MS = 3_600_000;
const t = useTestApp({ server: { processHeartbeatMs: HOUR_MS, processTimeoutMs: 2 * HOUR_MS } });
let b: App;
let aUrl: string;
const clients: { dispose(): void | Promise<void> }[] = [];

beforeAll(async () => {
  ({ url: aUrl } = await t.app.start());
  // Passes run by hand there too: the requests are taken by the workers' own pulls.
  b = await startSecondApp(
    t,
    { scheduler: { automatic: false }, provisioner: { enabled: false } },
    { log: createLogger('silent') },
  );
  await createWorkspace(t, 'debian/main');
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.dispose()));
  await b?.stop();
});

const workerRow = async (name: string) =>
  (
    await t.sql<{ connected: boolean; process: number | null; terminated: boolean }>(
      `select connected_at is not null as connected, connected_process_id as process, terminated_at is not null as terminated
         from worker where name = ?`,
      [name],
    )
  )[0];
const request = async (id: string) =>
  (await t.gql(`query($id: ID!) { workRequest(id: $id) { status retryCount statusReason worker { name } } }`, { id }))
    .data!.workRequest;
const take = async (token: string) =>
  (await t.gql(`mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`, {}, token)).data!
    .requestWork.workRequest?.id as string | undefined;
const start = (id: string, token: string) =>
  t.gql(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, token);

/** A worker connected through app A by a WebSocket, reporting `metadata`, holding one RUNNING and one ASSIGNED request. */
async function busyOnA(name: string, type: 'WORKER' | 'SERVER', task: { taskType: string; taskName: string }) {
  const token = await registerWorker(t, name, { type, concurrency: 2 });
  const { client } = wsClient(aUrl, token);
  clients.push(client);
  await until(`${name} to be connected through A`, async () => (await workerRow(name)).process === t.app.processId);
  await reportMetadata(t, token, {
    ...NOOP_METADATA,
    tasks: [{ type: task.taskType, name: task.taskName, version: 1 }],
  });
  const running = (await submitOk(t, { workspace: 'debian/main', ...task, taskData: {} })).id as string;
  const assigned = (await submitOk(t, { workspace: 'debian/main', ...task, taskData: {} })).id as string;
  expect(await take(token)).toBe(running);
  await start(running, token);
  expect(await take(token)).toBe(assigned);
  return { running, assigned };
}

describe('taking over from a dead process', () => {
  it('its workers are disconnected; their unacknowledged work is PENDING again uncounted, a server worker’s running work re-queued as a retry', async () => {
    const agent = await busyOnA('near', 'WORKER', { taskType: 'worker', taskName: 'noop' });
    const server = await busyOnA('srv', 'SERVER', { taskType: 'server', taskName: 'servernoop' });
    const nameA = t.app.config.server.processName;

    // Alive, A is left alone.
    const none = await takeOverDeadProcesses(b.orm.em.fork(), b.events, b.config, new Date());
    expect(none).toMatchObject({ processes: 0, workers: 0, requeued: 0 });
    expect(await workerRow('near')).toMatchObject({ connected: true, process: t.app.processId });

    await t.sql(`update server_process set heartbeat_at = now() - interval '1 minute' where id = ?`, [t.app.processId]);
    // Two processes at once: one takes it over, the other finds it held (skipped) or done.
    const both = await Promise.all([
      takeOverDeadProcesses(b.orm.em.fork(), b.events, b.config, new Date()),
      takeOverDeadProcesses(b.orm.em.fork(), b.events, b.config, new Date()),
    ]);
    const sum = (k: 'processes' | 'workers' | 'serverWorkers' | 'requeued') => both[0][k] + both[1][k];
    expect([sum('processes'), sum('workers'), sum('serverWorkers'), sum('requeued')]).toEqual([1, 2, 1, 3]);

    expect(await workerRow('near')).toMatchObject({ connected: false, process: null });
    expect(await workerRow('srv')).toMatchObject({ connected: false, process: null });
    expect(await request(agent.assigned)).toEqual({
      status: 'PENDING',
      retryCount: 0,
      statusReason: `worker near lost its server process (${nameA} stopped heartbeating); back to the queue, not started`,
      worker: null,
    });
    // An agent runs its work on its own machine: that is left to its heartbeat and lease.
    expect(await request(agent.running)).toMatchObject({ status: 'RUNNING', retryCount: 0, worker: { name: 'near' } });
    expect(await request(server.assigned)).toMatchObject({ status: 'PENDING', retryCount: 0, worker: null });
    expect(await request(server.running)).toEqual({
      status: 'PENDING',
      retryCount: 1,
      statusReason: `worker srv lost its server process (${nameA} stopped heartbeating); re-queued (retry 1 of 3)`,
      worker: null,
    });

    // Done once: nothing is left to take over, and B is untouched.
    expect(await takeOverDeadProcesses(b.orm.em.fork(), b.events, b.config, new Date())).toMatchObject({
      processes: 0,
      workers: 0,
      requeued: 0,
    });
    const [rowB] = await t.sql<{ stopped: boolean }>(
      `select stopped_at is not null as stopped from server_process where id = ?`,
      [b.processId],
    );
    expect(rowB).toEqual({ stopped: false });
  });

  it('deletes the rows silent for a week and terminates the server workers named after them that nothing else uses', async () => {
    const old = `now() - interval '8 days'`;
    await t.sql(
      `insert into server_process (name, host, pid, started_at, heartbeat_at, stopped_at)
       values ('retired', 'gone', 1, ${old}, ${old}, ${old}), ('retired-2', 'here', 2, now(), now(), null)`,
    );
    // server-retired (retired's only one), server-retired-3 (retired's third), and server-retired-2: the
    // second of retired's, or the only one of retired-2, which remains: kept.
    for (const name of [
      serverWorkerName('retired', 1, 1),
      serverWorkerName('retired', 3, 3),
      serverWorkerName('retired-2', 1, 1),
    ])
      await registerWorker(t, name, { type: 'SERVER' });
    await registerWorker(t, 'server-unrelated', { type: 'SERVER' });

    const done = await takeOverDeadProcesses(b.orm.em.fork(), b.events, b.config, new Date());
    expect(done).toMatchObject({ deleted: 1, terminated: 2 });
    expect((await t.sql(`select name from server_process order by name`)).map((r) => r.name)).not.toContain('retired');
    expect(await workerRow('server-retired')).toMatchObject({ terminated: true });
    expect(await workerRow('server-retired-3')).toMatchObject({ terminated: true });
    expect(await workerRow('server-retired-2')).toMatchObject({ terminated: false });
    expect(await workerRow('server-unrelated')).toMatchObject({ terminated: false });
    expect(await takeOverDeadProcesses(b.orm.em.fork(), b.events, b.config, new Date())).toMatchObject({
      deleted: 0,
      terminated: 0,
    });

    // A process that comes back under the name runs its server worker again, its own; stopping, it disconnects it.
    const back = await startSecondApp(
      t,
      { server: { processName: 'retired' }, serverWorkers: { count: 1 }, scheduler: { automatic: false } },
      { log: createLogger('silent') },
    );
    try {
      expect(back.serverWorkers.names).toEqual(['server-retired']);
      expect(await workerRow('server-retired')).toEqual({
        connected: true,
        process: back.processId,
        terminated: false,
      });
    } finally {
      await back.stop();
    }
    expect(await workerRow('server-retired')).toEqual({ connected: false, process: null, terminated: false });
  });
});
