import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_UNAUTHORIZED } from '../../src/server/app.js';
import { useTestApp } from '../helpers/app.js';
import { NOOP_METADATA } from '../helpers/fixtures.js';
import { collect, wsClient } from '../helpers/ws.js';

const t = useTestApp();
let url: string;
let workerToken: string;
let aliceToken: string;
const clients: { dispose(): void | Promise<void> }[] = [];

async function noop(token: string, workspace = 'debian/main') {
  const r = await t.gql(
    `mutation($w: String!) { createWorkRequest(input: { workspace: $w, taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } ... on Error { message } } }`,
    { w: workspace },
    token,
  );
  return r.data!.createWorkRequest.id as string;
}

beforeAll(async () => {
  ({ url } = await t.app.start());
  await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
  await t.gql(`mutation { createWorkspace(input: { name: "debian/private", isPublic: false }) { __typename } }`);
  aliceToken = (
    await t.gql(`mutation { createUser(input: { username: "alice" }) { ... on UserTokenPayload { token } } }`)
  ).data!.createUser.token;
  await t.gql(`mutation { setWorkspaceMember(input: { workspace: "debian/main", username: "alice" }) { __typename } }`);
  workerToken = (
    await t.gql(`mutation { registerWorker(input: { name: "w1" }) { ... on WorkerTokenPayload { token } } }`)
  ).data!.registerWorker.token;
  await t.gql(
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: NOOP_METADATA },
    workerToken,
  );
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
});

describe('graphql-ws on the GraphQL port', () => {
  it('closes a connection with a wrong token with 4401 and a reason', async () => {
    const { closed } = wsClient(url, 'tsk_worker_not-a-token');
    const event = await closed;
    expect(event.code).toBe(CLOSE_UNAUTHORIZED);
    expect(event.reason).toMatch(/Unauthorized: the bearer token is not valid/);
  });

  it('marks the worker connected while its socket is open, and disconnected when it closes', async () => {
    const { client } = wsClient(url, workerToken);
    const sub = collect(client, `subscription { workerChanged(name: "w1") { name connectedAt } }`);
    const status = async () => (await t.gql(`{ worker(name: "w1") { status connectedAt } }`)).data!.worker;
    await new Promise((r) => setTimeout(r, 200));
    expect((await status()).connectedAt).not.toBeNull();
    sub.dispose();
    await client.dispose();
    for (let i = 0; i < 50 && (await status()).connectedAt !== null; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await status()).toEqual({ status: 'DISCONNECTED', connectedAt: null });
  });

  it('pushes assignments to the worker, redelivers unacknowledged ones on resubscription, and only its own', async () => {
    const first = wsClient(url, workerToken);
    clients.push(first.client);
    const sub = collect(first.client, `subscription { assignments { id taskName status } }`);
    await new Promise((r) => setTimeout(r, 200));
    const a = await noop(aliceToken);
    await t.app.scheduler.runPass();
    expect(await sub.next(1)).toEqual([{ assignments: { id: a, taskName: 'noop', status: 'ASSIGNED' } }]);
    sub.dispose();
    await first.client.dispose();

    // Not acknowledged: a new subscription gets it again, first.
    const second = wsClient(url, workerToken);
    clients.push(second.client);
    const again = collect(second.client, `subscription { assignments { id } }`);
    expect(await again.next(1)).toEqual([{ assignments: { id: a } }]);
    // Acknowledged and completed: it is not delivered again.
    await t.gql(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id: a }, workerToken);
    await t.gql(
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id: a },
      workerToken,
    );
    const b = await noop(aliceToken);
    await t.app.scheduler.runPass();
    expect(await again.next(2)).toEqual([{ assignments: { id: a } }, { assignments: { id: b } }]);
    again.dispose();

    // An admin (not a worker) cannot subscribe to assignments.
    const admin = wsClient(url, t.adminToken);
    clients.push(admin.client);
    const refused = collect(admin.client, `subscription { assignments { id } }`);
    await expect(refused.next(1, 2000)).rejects.toThrow(/worker token/);
  });

  it('streams workRequestChanged with the visibility rules', async () => {
    const alice = wsClient(url, aliceToken);
    clients.push(alice.client);
    const seen = collect(alice.client, `subscription { workRequestChanged { id status workspace { name } } }`);
    await new Promise((r) => setTimeout(r, 200));
    await noop(t.adminToken, 'debian/private'); // alice may not see this one
    const mine = await noop(aliceToken);
    const [event] = await seen.next(1);
    expect(event).toEqual({ workRequestChanged: { id: mine, status: 'PENDING', workspace: { name: 'debian/main' } } });
    await new Promise((r) => setTimeout(r, 200));
    expect(seen.items.every((e: any) => e.workRequestChanged.workspace.name === 'debian/main')).toBe(true);
  });

  it('shows each event as it is now: one long-lived subscription, the worker IDLE then BUSY then IDLE', async () => {
    const name = 'w-fresh';
    const freshToken = (
      await t.gql(`mutation { registerWorker(input: { name: "w-fresh" }) { ... on WorkerTokenPayload { token } } }`)
    ).data!.registerWorker.token as string;
    const admin = wsClient(url, t.adminToken);
    clients.push(admin.client);
    const seen = collect(
      admin.client,
      `subscription($n: String) { workerChanged(name: $n) { name status activeWorkCount } }`,
      { n: name },
    );
    await new Promise((r) => setTimeout(r, 200));
    const report = () =>
      t.gql(
        `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
        { m: NOOP_METADATA },
        freshToken,
      );
    await report();
    expect(await seen.next(1)).toEqual([{ workerChanged: { name, status: 'IDLE', activeWorkCount: 0 } }]);
    await noop(aliceToken);
    const pulled = await t.gql(
      `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`,
      {},
      freshToken,
    );
    const id = pulled.data!.requestWork.workRequest.id as string; // the oldest pending request: earlier tests may have left one
    await t.gql(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, freshToken);
    // Each report is an event; the last one seen must show the worker as it is after that report.
    const afterReport = async () => {
      const before = seen.items.length;
      await report();
      return (await seen.next(before + 1)).at(-1);
    };
    expect(await afterReport()).toEqual({ workerChanged: { name, status: 'BUSY', activeWorkCount: 1 } });
    await t.gql(
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id },
      freshToken,
    );
    expect(await afterReport()).toEqual({ workerChanged: { name, status: 'IDLE', activeWorkCount: 0 } });
  });
});
