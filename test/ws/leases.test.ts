import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

// The sweep is called directly, with a clock moved forward, instead of waiting for timers: nothing here
// depends on how fast the machine is.
const t = useTestApp({ leases: { ackTimeoutMs: 60_000, heartbeatTimeoutMs: 120_000, maxRetries: 2 } });
const later = (ms: number) => new Date(Date.now() + ms);

const META = {
  architectures: ['amd64'],
  executors: ['unshare'],
  tasks: [{ type: 'worker', name: 'noop', version: 1 }],
};

async function worker(name: string) {
  const token = (
    await t.gql(
      `mutation($n: String!) { registerWorker(input: { name: $n }) { ... on WorkerTokenPayload { token } } }`,
      { n: name },
    )
  ).data!.registerWorker.token as string;
  await t.gql(
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: META },
    token,
  );
  return token;
}
const take = async (token: string) =>
  (await t.gql(`mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`, {}, token)).data!
    .requestWork.workRequest?.id as string | undefined;
const state = async (id: string) =>
  (await t.gql(`query($id: ID!) { workRequest(id: $id) { status retryCount statusReason worker { name } } }`, { id }))
    .data!.workRequest;

describe('leases', () => {
  it('re-queues an unacknowledged assignment, then a silent running one, and aborts after the maximum retries', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const a = await worker('a');
    const b = await worker('b');
    const id = (
      await t.gql(
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
      )
    ).data!.createWorkRequest.id as string;

    // 1. a takes it and never acknowledges: back to PENDING, retry 1.
    expect(await take(a)).toBe(id);
    expect(await t.app.scheduler.sweepLeases(later(30_000))).toBe(0); // not expired yet
    expect(await t.app.scheduler.sweepLeases(later(61_000))).toBe(1);
    expect(await state(id)).toEqual({
      status: 'PENDING',
      retryCount: 1,
      statusReason: 'worker a did not acknowledge the assignment in time; re-queued (retry 1 of 2)',
      worker: null,
    });

    // 2. b takes it, starts it, then goes silent while a keeps heartbeating: back to PENDING, retry 2.
    expect(await take(b)).toBe(id);
    await t.gql(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, b);
    await t.sql(`update worker set last_seen_at = now() - interval '3 minutes' where name = 'b'`); // b went silent
    await t.gql(`mutation { heartbeat(input: {}) { __typename } }`, {}, a);
    expect(await t.app.scheduler.sweepLeases()).toBe(1);
    expect(await state(id)).toMatchObject({
      status: 'PENDING',
      retryCount: 2,
      statusReason: expect.stringMatching(/^worker b stopped heartbeating while running it/),
    });

    // 3. a takes it and dies too: past the maximum it is ABORTED with the reason, and stays with a for the record.
    expect(await take(a)).toBe(id);
    await t.gql(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, a);
    await t.sql(`update worker set last_seen_at = now() - interval '3 minutes' where name = 'a'`); // a died
    expect(await t.app.scheduler.sweepLeases()).toBe(1);
    expect(await state(id)).toEqual({
      status: 'ABORTED',
      retryCount: 3,
      statusReason: 'worker a stopped heartbeating while running it (retry 3 of 2): aborted',
      worker: { name: 'a' },
    });
    // A late completion from the dead worker is refused.
    const late = await t.gql(
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename ... on Error { code } } }`,
      { id },
      a,
    );
    expect(late.data!.completeWorkRequest).toEqual({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
  });

  it('lets the assignee give work back untouched with releaseWorkRequest', async () => {
    const c = await worker('c');
    const id = (
      await t.gql(
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
      )
    ).data!.createWorkRequest.id as string;
    expect(await take(c)).toBe(id);
    const released = await t.gql(
      `mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "no handler for noop" }) { ... on WorkRequest { status retryCount statusReason } } }`,
      { id },
      c,
    );
    expect(released.data!.releaseWorkRequest).toEqual({
      status: 'PENDING',
      retryCount: 0,
      statusReason: 'released by worker c: no handler for noop',
    });
  });
});
