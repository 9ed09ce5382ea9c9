/**
 * The built-in server workers: two app instances (two server processes) on one database, each with
 * its server worker, automatic scheduling and events through PostgreSQL. Server tasks are assigned,
 * run and completed like any work; each runs once; a server worker restarted under its name takes back
 * what its previous process held, as an expired lease. test/workflows/pipeline.test.ts kills a real
 * server process to show the lease rules taking work from a dead one.
 */
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/server/app.js';
import type { ConfigOverrides } from '../../src/core/config/config.js';
import { serverWorkerName } from '../../src/loops/server-tasks/server-workers.js';
import { until } from '../faults/harness.js';
import { harnessOn, startSecondApp, useTestApp } from '../helpers/app.js';
import { createWorkspace, ok, submitOk } from '../helpers/fixtures.js';
import { captureLog } from '../helpers/log-capture.js';

const SERVER_WORKERS: ConfigOverrides = { serverWorkers: { count: 1, concurrency: 2 }, scheduler: { automatic: true } };
const logA = captureLog('info');
const a = useTestApp(SERVER_WORKERS, { log: () => logA.log });
/** The second process listens on a port of its own, so that it can be started again under the same worker name. */
const B_PORT = 4761;
let logB = captureLog('info');
let b: App | null = null;

async function startB(): Promise<App> {
  logB = captureLog('info');
  return startSecondApp(a, { ...SERVER_WORKERS, server: { port: B_PORT } }, { log: logB.log });
}

beforeAll(async () => {
  await a.app.start();
  b = await startB();
  await createWorkspace(a, 'debian/main');
});
afterAll(async () => {
  await b?.stop();
});

const servernoop = (data: Record<string, unknown> = {}) => ({
  workspace: 'debian/main',
  taskType: 'server',
  taskName: 'servernoop',
  taskData: data,
});
const started = (id: string) =>
  [...logA.lines(), ...logB.lines()].filter((l) => l.msg === 'server task started' && String(l.id) === id);

async function finished(ids: string[]) {
  return until(`requests ${ids.join(', ')} to finish`, async () => {
    const rows = await a.sql<{
      id: number;
      status: string;
      result: string | null;
      retry_count: number;
      worker: string;
      type: string;
    }>(
      `select r.id, r.status, r.result, r.retry_count, w.name as worker, w.type from work_request r left join worker w on w.id = r.worker_id where r.id = any(?::int[]) order by r.id`,
      [`{${ids.join(',')}}`],
    );
    return rows.every((r) => r.status === 'COMPLETED' || r.status === 'ABORTED') && rows;
  });
}

describe('built-in server workers', () => {
  it('each process has one, named after its process name, connected, of type server, offering its server tasks', async () => {
    const names = [a.app.serverWorkers.names, b!.serverWorkers.names];
    expect(names[1]).toEqual([serverWorkerName(`${os.hostname()}:${B_PORT}`, 1, 1)]);
    expect(names[0]).toEqual([serverWorkerName(a.app.config.server.processName, 1, 1)]);
    const data = await ok(
      a,
      `{ workers(first: 10) { edges { node { name type status concurrency providedTags { tag provenance source } } } } }`,
    );
    const servers = data.workers.edges.map((e: any) => e.node).filter((w: any) => w.type === 'SERVER');
    expect(servers.map((w: any) => w.name).sort()).toEqual(names.flat().sort());
    for (const w of servers) {
      expect(w).toMatchObject({ status: 'IDLE', concurrency: 2 });
      expect(w.providedTags).toEqual(
        expect.arrayContaining([
          { tag: 'worker:type:server', provenance: 'SYSTEM', source: 'worker.type' },
          { tag: 'worker:task:server:servernoop:version:1', provenance: 'WORKER', source: 'dynamic-metadata' },
        ]),
      );
    }
  });

  it('run servernoop through the ordinary lifecycle, with the result its data asks for', async () => {
    const ids = [(await submitOk(a, servernoop())).id, (await submitOk(a, servernoop({ result: false }))).id];
    const rows = await finished(ids);
    expect(rows.map((r) => [r.status, r.result, r.type, r.retry_count])).toEqual([
      ['COMPLETED', 'SUCCESS', 'server', 0],
      ['COMPLETED', 'FAILURE', 'server', 0],
    ]);
    for (const id of ids) expect(started(id)).toHaveLength(1);
  });

  it('two processes never run a server task twice: many created through both at once each run exactly once', async () => {
    const through = harnessOn(a, b!);
    const ids = (
      await Promise.all(Array.from({ length: 40 }, (_, i) => submitOk(i % 2 ? a : through, servernoop())))
    ).map((r) => r.id as string);

    const rows = await finished(ids);
    expect(rows.every((r) => r.status === 'COMPLETED' && r.result === 'SUCCESS' && r.retry_count === 0)).toBe(true);
    for (const id of ids) expect(started(id), `request ${id}`).toHaveLength(1);
    const runners = new Set(rows.map((r) => r.worker));
    expect([...runners].every((n) => [...a.app.serverWorkers.names, ...b!.serverWorkers.names].includes(n))).toBe(true);
  });

  it('a process that stops marks its server worker disconnected; started again on its port, it takes back the run its previous process held, as an expired lease', async () => {
    const [nameB] = b!.serverWorkers.names;
    await b!.stop();
    b = null;
    const [row] = await a.sql<{ id: number; connected_at: Date | null }>(
      `select id, connected_at from worker where name = ?`,
      [nameB],
    );
    expect(row.connected_at).toBeNull();

    // A run B held when it died: the other server worker is disabled so that only B can take it again.
    const [nameA] = a.app.serverWorkers.names;
    await ok(a, `mutation($n: String!) { disableWorker(input: { name: $n }) { __typename } }`, { n: nameA });
    try {
      const id = (await submitOk(a, servernoop())).id as string;
      await a.sql(
        `update work_request set status = 'RUNNING', worker_id = ?, assigned_at = now(), started_at = now() where id = ?`,
        [row.id, Number(id)],
      );
      b = await startB();
      const [done] = await finished([id]);
      expect(done).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS', retry_count: 1, worker: nameB });
      expect(logB.lines().filter((l) => l.msg === 'took back the work its previous process held')).toEqual([
        expect.objectContaining({ worker: nameB, taken: [Number(id)] }),
      ]);
      expect(started(id)).toHaveLength(1);
    } finally {
      await ok(a, `mutation($n: String!) { enableWorker(input: { name: $n }) { __typename } }`, { n: nameA });
    }
  });
});
