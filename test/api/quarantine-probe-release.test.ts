import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { AMD64_METADATA, connectedWorker, createWorkspace, ok, sbuild } from '../helpers/fixtures.js';

// A quarantine probe is for its worker alone (services/work/quarantine-probes.ts): one that is released, or
// whose lease runs out, is ABORTED, never put back in the queue where another worker would run it.
const t = useTestApp({ workers: { quarantineProbeMs: 60_000 } });

const METADATA = { ...AMD64_METADATA, tasks: [...AMD64_METADATA.tasks, { type: 'worker', name: 'noop', version: 1 }] };
let token: string;

/** Quarantines `probe-1` an hour ago, with an errored request of its own (the probe takes its workspace and creator). */
async function quarantine(): Promise<void> {
  const d = await ok(
    t,
    `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { ... on WorkRequest { id } } }`,
    { i: sbuild('debian/main') },
  );
  const id = Number((d.createWorkRequest as { id: string }).id);
  await t.sql(
    `update work_request set status = 'COMPLETED', result = 'ERROR', worker_id = (select id from worker where name = 'probe-1'),
            assigned_at = now() - interval '2 hours', started_at = now() - interval '2 hours', completed_at = now() - interval '2 hours' where id = ?`,
    [id],
  );
  await t.sql(
    `update worker set quarantined_at = now() - interval '1 hour', quarantine_reason = 'its last results are ERROR (test)' where name = 'probe-1'`,
  );
}

/** Runs a probe round and returns the one probe it gave. */
async function probe(): Promise<number> {
  const given = await t.app.scheduler.probeQuarantined();
  expect(given).toHaveLength(1);
  const [row] = await t.sql<{ status: string; quarantine_probe: boolean; worker: string }>(
    `select r.status, r.quarantine_probe, w.name as worker from work_request r join worker w on w.id = r.worker_id where r.id = ?`,
    [given[0].workRequestId],
  );
  expect(row).toEqual({ status: 'ASSIGNED', quarantine_probe: true, worker: 'probe-1' });
  return given[0].workRequestId;
}

const state = async (id: number) =>
  (
    await t.sql<{ status: string; worker_id: number | null; status_reason: string | null }>(
      `select status, worker_id, status_reason from work_request where id = ?`,
      [id],
    )
  )[0];
const pending = async () =>
  (await t.sql<{ n: number }>(`select count(*)::int as n from work_request where status = 'PENDING'`))[0].n;
const quarantined = async () =>
  (await t.sql<{ q: boolean }>(`select quarantined_at is not null as q from worker where name = 'probe-1'`))[0].q;

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  token = await connectedWorker(t, 'probe-1', {}, METADATA);
  await quarantine();
});

describe('a quarantine probe is never re-queued', () => {
  it('released by its agent: ABORTED with the reason, nothing pending, the worker still quarantined', async () => {
    const id = await probe();
    const d = await ok(
      t,
      `mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "no handler" }) { __typename ... on WorkRequest { status } } }`,
      { id: String(id) },
      token,
    );
    expect(d.releaseWorkRequest).toEqual({ __typename: 'WorkRequest', status: 'ABORTED' });
    const row = await state(id);
    expect(row.status).toBe('ABORTED');
    expect(row.status_reason).toContain('released by worker probe-1: no handler');
    expect(row.status_reason).toContain('never re-queued');
    expect(await pending()).toBe(0);
    expect(await quarantined()).toBe(true);
    // Its status page says what it was.
    const { url } = await t.app.start();
    const res = await fetch(url.replace(/\/graphql$/, `/-/status/work-requests/${id}/`), {
      headers: { authorization: `Bearer ${t.adminToken}` },
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('a quarantine probe: its SUCCESS lifts the quarantine of its worker');
  });

  it('its lease run out (not acknowledged): ABORTED by the sweep, nothing pending', async () => {
    // The last probe was given just now: the next is due only after the interval.
    expect(await t.app.scheduler.probeQuarantined()).toEqual([]);
    await t.sql(`update work_request set created_at = now() - interval '2 minutes' where quarantine_probe`);
    const id = await probe();
    await t.sql(`update work_request set assigned_at = now() - interval '1 hour' where id = ?`, [id]);
    await t.app.scheduler.sweepLeases();
    const row = await state(id);
    expect(row.status).toBe('ABORTED');
    expect(row.status_reason).toContain('did not acknowledge the assignment in time');
    expect(row.status_reason).toContain('never re-queued');
    expect(await pending()).toBe(0);
    expect(await quarantined()).toBe(true);
  });
});
