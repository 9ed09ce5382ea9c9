/**
 * The built-in server workers stay available for as long as their process runs: they report their
 * metadata on every tick, so a service that has been up longer than TAGSCHED_METADATA_FRESH_SECONDS
 * still runs server tasks. The window is one second here (a setting, not an hour's sleep); each check
 * waits two windows first. Two processes share one database, and one of them is restarted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/server/app.js';
import { loadConfig, type ConfigOverrides } from '../../src/core/config/config.js';
import { tickMsOf } from '../../src/loops/server-tasks/server-workers.js';
import { until } from '../faults/harness.js';
import { startSecondApp, useTestApp } from '../helpers/app.js';
import { createWorkspace, ok, submitOk } from '../helpers/fixtures.js';

const FRESH_MS = 1_000;
const TWO_WINDOWS_MS = 2 * FRESH_MS + 500;
const SERVER_WORKERS: ConfigOverrides = {
  serverWorkers: { count: 1, concurrency: 1 },
  scheduler: { automatic: true },
  workers: { metadataFreshMs: FRESH_MS },
};
const a = useTestApp(SERVER_WORKERS);
const B_PORT = 4771;
let b: App | null = null;

const startB = () => startSecondApp(a, { ...SERVER_WORKERS, server: { port: B_PORT } });

beforeAll(async () => {
  await a.app.start();
  b = await startB();
  await createWorkspace(a, 'debian/main');
});
afterAll(async () => {
  await b?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Submits a servernoop and waits for it to end; returns its status, result and the worker that ran it. */
async function runServernoop(): Promise<{ status: string; result: string | null; worker: string | null }> {
  const { id } = await submitOk(a, {
    workspace: 'debian/main',
    taskType: 'server',
    taskName: 'servernoop',
    taskData: {},
  });
  return until(`servernoop ${id} to finish`, async () => {
    const [row] = await a.sql<{ status: string; result: string | null; worker: string | null }>(
      `select r.status, r.result, w.name as worker from work_request r left join worker w on w.id = r.worker_id where r.id = ?`,
      [Number(id)],
    );
    return (row.status === 'COMPLETED' || row.status === 'ABORTED') && row;
  });
}

async function statusOf(name: string): Promise<string> {
  const data = await ok(a, `query($n: String!) { worker(name: $n) { status } }`, { n: name });
  return data.worker.status as string;
}

/** Only `name` may take server work while fn runs: every other server worker is disabled meanwhile. */
async function onlyOn<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const others = [...a.app.serverWorkers.names, ...(b?.serverWorkers.names ?? [])].filter((n) => n !== name);
  for (const n of others)
    await ok(a, `mutation($n: String!) { disableWorker(input: { name: $n }) { __typename } }`, { n });
  try {
    return await fn();
  } finally {
    for (const n of others)
      await ok(a, `mutation($n: String!) { enableWorker(input: { name: $n }) { __typename } }`, { n });
  }
}

describe('server workers outlive the metadata freshness window', () => {
  it('report their metadata well within the window', () => {
    const leases = { ackTimeoutMs: 60_000, heartbeatTimeoutMs: 120_000 };
    expect(tickMsOf(loadConfig({}, { leases, workers: { metadataFreshMs: FRESH_MS } }))).toBeLessThanOrEqual(
      FRESH_MS / 2,
    );
    expect(tickMsOf(loadConfig({}, { leases, workers: { metadataFreshMs: 65 * 60_000 } }))).toBe(15_000);
  });

  it('each of two processes runs a server task submitted after two windows, and its worker is not STALE', async () => {
    await sleep(TWO_WINDOWS_MS);
    for (const name of [a.app.serverWorkers.names[0], b!.serverWorkers.names[0]]) {
      expect(await statusOf(name)).toBe('IDLE');
      const done = await onlyOn(name, runServernoop);
      expect(done).toEqual({ status: 'COMPLETED', result: 'SUCCESS', worker: name });
    }
  });

  it('a restarted process runs server tasks submitted two windows after its restart', async () => {
    const [nameB] = b!.serverWorkers.names;
    await b!.stop();
    b = await startB();
    expect(b.serverWorkers.names).toEqual([nameB]);
    await sleep(TWO_WINDOWS_MS);
    expect(await statusOf(nameB)).toBe('IDLE');
    expect(await onlyOn(nameB, runServernoop)).toEqual({ status: 'COMPLETED', result: 'SUCCESS', worker: nameB });
  });
});
