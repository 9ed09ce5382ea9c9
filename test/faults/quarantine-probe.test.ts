import { describe, expect, it } from 'vitest';
import { settled, states, until, useFleet, type Agent, type Server } from './harness.js';

// Quarantine probes (docs/design.md: placement quality, src/services/work/quarantine-probes.ts) with real agents over real
// WebSockets: an agent whose handler exits 3 (ERROR) while another agent runs the same noop with
// SUCCESS is quarantined; the server then gives it, once per TAGSCHED_QUARANTINE_PROBE_SECONDS, a
// noop work request marked as a probe, which the agent receives on its assignments subscription like
// any assignment. A SUCCESS lifts the quarantine; an ERROR leaves it; no ordinary work goes to it.
const f = useFleet();

/** The agent environment whose every handler run ends in ERROR (exit code 3). */
const BROKEN = { FAULT_OUTPUT: 'exit 3' };

const gql = async (server: Server, query: string, variables: Record<string, unknown> = {}) => {
  const r = await f.gql(server.url, query, variables);
  expect(r.errors, JSON.stringify(r)).toBeUndefined();
  return r.data!;
};
const switchWorker = (server: Server, change: 'enable' | 'disable', name: string) =>
  gql(server, `mutation($n: String!) { ${change}Worker(input: { name: $n }) { __typename } }`, { n: name });
const statusOf = async (server: Server, name: string) =>
  (await gql(server, `query($n: String!) { worker(name: $n) { status } }`, { n: name })).worker.status as string;

/** Creates a noop and waits until it is over; returns its final state. */
async function runNoop(server: Server) {
  const id = await f.createNoop(server.url);
  return (await settled(f, [id]))[0];
}

/** The quarantine probes of a worker, oldest first, straight from the database. */
const probesOf = (name: string) =>
  f.sql<{ id: number; status: string; result: string | null; created_at: Date; task_name: string }>(
    `select r.id, r.status, r.result, r.created_at, r.task_name from work_request r join worker k on k.id = r.worker_id
      where r.quarantine_probe and k.name = $1 order by r.id`,
    [name],
  );

/**
 * Starts `name` with a broken handler and `${name}-good` with a working one, and quarantines `name`:
 * an ERROR on it, a SUCCESS of the same task on the good one, an ERROR on it again
 * (TAGSCHED_QUARANTINE_AFTER_ERRORS=2). The good worker is left disabled.
 */
async function quarantined(server: Server, name: string): Promise<{ broken: Agent }> {
  const broken = await f.agent({ name, url: server.url, env: BROKEN });
  const good = await f.agent({ name: `${name}-good`, url: server.url });
  await switchWorker(server, 'disable', good.name);
  expect(await runNoop(server)).toMatchObject({ worker: name, result: 'ERROR' });
  await switchWorker(server, 'disable', name);
  await switchWorker(server, 'enable', good.name);
  expect(await runNoop(server)).toMatchObject({ worker: good.name, result: 'SUCCESS' });
  await switchWorker(server, 'disable', good.name);
  await switchWorker(server, 'enable', name);
  expect(await runNoop(server)).toMatchObject({ worker: name, result: 'ERROR' });
  expect(await statusOf(server, name)).toBe('QUARANTINED');
  return { broken };
}

const serverEnv = (probeSeconds: string) => ({
  TAGSCHED_QUARANTINE_AFTER_ERRORS: '2',
  TAGSCHED_QUARANTINE_PROBE_SECONDS: probeSeconds,
});

describe.sequential('quarantine probes', () => {
  it('a worker quarantined by ERRORs while the task succeeds elsewhere is lifted by a probe its real agent runs with SUCCESS', async () => {
    const server = await f.server(serverEnv('2'));
    try {
      const { broken } = await quarantined(server, 'qp-fixed');
      // The machine is mended: the same worker (same token) comes back with a working handler.
      await broken.kill();
      await f.agent({ name: 'qp-fixed', url: server.url, token: broken.token });
      await until('qp-fixed to leave its quarantine', async () => (await statusOf(server, 'qp-fixed')) === 'IDLE');
      const probes = await probesOf('qp-fixed');
      expect(probes.map((p) => [p.task_name, p.status, p.result])).toEqual([['noop', 'COMPLETED', 'SUCCESS']]);
      // The agent ran it (the handler recorded the execution), and the API shows it as a probe on the worker.
      expect(f.executions().filter((e) => e.id === String(probes[0].id))).toEqual([
        expect.objectContaining({ agent: 'qp-fixed', done: true }),
      ]);
      const { worker } = await gql(
        server,
        `query { worker(name: "qp-fixed") { status quarantineReason lastQuarantineProbe { id taskName quarantineProbe status result worker { name } workspace { name } createdBy { username } } } }`,
      );
      expect(worker).toEqual({
        status: 'IDLE',
        quarantineReason: null,
        lastQuarantineProbe: {
          id: String(probes[0].id),
          taskName: 'noop',
          quarantineProbe: true,
          status: 'COMPLETED',
          result: 'SUCCESS',
          worker: { name: 'qp-fixed' },
          workspace: { name: 'debian/main' }, // the workspace of its last errored request, with its creator
          createdBy: { username: 'admin' },
        },
      });
      // Lifted, it gets ordinary work again.
      expect(await runNoop(server)).toMatchObject({ worker: 'qp-fixed', result: 'SUCCESS' });
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('a probe that fails leaves the quarantine, and the next probe waits for the interval', async () => {
    const server = await f.server(serverEnv('3'));
    try {
      await quarantined(server, 'qp-broken');
      const [first] = await until('a first probe to end', async () => {
        const probes = await probesOf('qp-broken');
        return probes[0]?.status === 'COMPLETED' && probes;
      });
      expect(first.result).toBe('ERROR');
      expect(await statusOf(server, 'qp-broken')).toBe('QUARANTINED');
      const probes = await until('a second probe', async () => {
        const all = await probesOf('qp-broken');
        return all.length >= 2 && all;
      });
      // Given no sooner than the interval after the first (which took a fraction of a second).
      expect(probes[1].created_at.getTime() - first.created_at.getTime()).toBeGreaterThanOrEqual(3000);
      await until('the second probe to end', async () => (await probesOf('qp-broken'))[1].status === 'COMPLETED');
      expect(await statusOf(server, 'qp-broken')).toBe('QUARANTINED');
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('a quarantined worker gets probes but no ordinary pending work', async () => {
    const server = await f.server(serverEnv('1'));
    try {
      await quarantined(server, 'qp-idle');
      const ordinary = await f.createNoop(server.url);
      // Probes run on it while the ordinary request, which it could run, waits.
      await until(
        'two probes to end',
        async () => (await probesOf('qp-idle')).filter((p) => p.status === 'COMPLETED').length >= 2,
      );
      expect(await states(f, [ordinary])).toEqual([expect.objectContaining({ status: 'PENDING', worker: null })]);
      const probeIds = new Set((await probesOf('qp-idle')).map((p) => String(p.id)));
      const ranSinceQuarantine = f
        .executions()
        .filter((e) => e.agent === 'qp-idle')
        .slice(2); // the first two are the errors that quarantined it
      expect(ranSinceQuarantine.filter((e) => !probeIds.has(e.id))).toEqual([]);
      // A worker that is not quarantined takes it.
      await switchWorker(server, 'enable', 'qp-idle-good');
      expect((await settled(f, [ordinary]))[0]).toMatchObject({ worker: 'qp-idle-good', result: 'SUCCESS' });
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('gives no probe when TAGSCHED_QUARANTINE_PROBE_SECONDS is 0', async () => {
    const server = await f.server(serverEnv('0'));
    try {
      await quarantined(server, 'qp-never');
      // Absence can only be waited for: four periodic sweeps (TAGSCHED_SCHEDULER_INTERVAL_SECONDS=1),
      // where a probe interval of one second would have given one.
      await new Promise((r) => setTimeout(r, 4000));
      expect(await probesOf('qp-never')).toEqual([]);
      expect(await statusOf(server, 'qp-never')).toBe('QUARANTINED');
    } finally {
      await server.stop();
    }
  }, 120_000);
});
