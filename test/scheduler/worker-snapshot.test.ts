import { describe, expect, it } from 'vitest';
import { loadWorkerStates, WorkerSnapshot } from '../../src/scheduler/storage/worker-snapshot.js';
import { useTestApp } from '../helpers/app.js';
import { AMD64_METADATA, ok } from '../helpers/fixtures.js';

const t = useTestApp();

const META = (arch: string, extra: Record<string, unknown> = {}) => ({
  ...AMD64_METADATA,
  architectures: [arch],
  ...extra,
});

async function register(name: string, arch: string): Promise<string> {
  const data = await ok(
    t,
    `mutation($n: String!) { registerWorker(input: { name: $n }) { ... on WorkerTokenPayload { token } } }`,
    { n: name },
  );
  const token = data.registerWorker.token as string;
  await report(token, META(arch));
  return token;
}

async function report(token: string, metadata: Record<string, unknown>): Promise<void> {
  const data = await ok(
    t,
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: metadata },
    token,
  );
  expect(data.reportWorkerMetadata.__typename).toBe('Worker');
}

const versionOf = async (name: string) =>
  (await t.sql<{ v: string }>(`select shape_version::text as v from worker where name = ?`, [name]))[0].v;

/** The snapshot's answer must always be the one a full read gives. */
async function expectSameAsFullRead(snapshot: WorkerSnapshot): Promise<Awaited<ReturnType<typeof loadWorkerStates>>> {
  const em = t.app.orm.em.fork();
  const now = new Date();
  const kept = await snapshot.load(em, now, t.app.config.workers.metadataFreshMs);
  expect(kept).toEqual(await loadWorkerStates(em, now, t.app.config.workers.metadataFreshMs));
  return kept;
}

describe('the worker snapshot', () => {
  it('re-reads a worker whose tags changed, and only then; heartbeats do not move its version', async () => {
    const snapshot = new WorkerSnapshot();
    const token = await register('snap-1', 'amd64');
    await register('snap-2', 'arm64');
    let states = await expectSameAsFullRead(snapshot);
    expect(states.find((w) => w.name === 'snap-1')!.providedTags).toContain('worker:build-arch:amd64');
    const readAtFirst = snapshot.shapesRead;
    expect(readAtFirst).toBe(states.length);
    await expectSameAsFullRead(snapshot);
    expect(snapshot.shapesRead).toBe(readAtFirst); // nothing changed: no shape read again

    const before = await versionOf('snap-1');
    await ok(t, `mutation { heartbeat(input: {}) { __typename } }`, {}, token);
    await report(token, META('amd64')); // the same facts again: the same tags
    expect(await versionOf('snap-1')).toBe(before);

    await report(token, META('amd64', { architectures: ['amd64', 'i386'] }));
    expect(await versionOf('snap-1')).not.toBe(before);
    states = await expectSameAsFullRead(snapshot);
    expect(states.find((w) => w.name === 'snap-1')!.providedTags).toContain('worker:build-arch:i386');
    expect(snapshot.shapesRead).toBe(readAtFirst + 1); // that worker only
  });

  it('follows the state without a tag change: disabled, draining, connected, load', async () => {
    const snapshot = new WorkerSnapshot();
    await register('snap-3', 'riscv64');
    await expectSameAsFullRead(snapshot);
    await ok(t, `mutation { disableWorker(input: { name: "snap-3" }) { __typename } }`);
    let states = await expectSameAsFullRead(snapshot);
    expect(states.find((w) => w.name === 'snap-3')).toMatchObject({ unavailable: 'DISABLED', free: 0 });
    await ok(t, `mutation { enableWorker(input: { name: "snap-3" }) { __typename } }`);
    await ok(t, `mutation { drainWorker(input: { name: "snap-3" }) { __typename } }`);
    const read = snapshot.shapesRead;
    states = await expectSameAsFullRead(snapshot);
    expect(states.find((w) => w.name === 'snap-3')).toMatchObject({ unavailable: 'DRAINING' });
    expect(snapshot.shapesRead).toBe(read);
  });

  it('sees new workers, a changed concurrency, and forgets terminated and removed ones', async () => {
    const snapshot = new WorkerSnapshot();
    await register('snap-4', 's390x');
    await expectSameAsFullRead(snapshot);
    await register('snap-5', 's390x');
    await t.sql(`update worker set concurrency = 3 where name = 'snap-4'`);
    let states = await expectSameAsFullRead(snapshot);
    expect(states.find((w) => w.name === 'snap-4')!.concurrency).toBe(3);
    expect(states.map((w) => w.name)).toContain('snap-5');
    await t.sql(`update worker set terminated_at = now() where name = 'snap-5'`);
    await t.sql(`delete from token where worker_id = (select id from worker where name = 'snap-4')`);
    await t.sql(`delete from worker where name = 'snap-4'`);
    states = await expectSameAsFullRead(snapshot);
    expect(states.map((w) => w.name)).not.toContain('snap-5');
    expect(states.map((w) => w.name)).not.toContain('snap-4');
  });
});
