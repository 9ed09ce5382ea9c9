/**
 * The agent's acknowledgement and report over its open WebSocket connection (api/ws/connection-identity.ts):
 * run as the connection's worker, the token checked again for each, refused and closed (4401) once
 * the token is no longer valid, whichever way it was ended; other operations on a connection look
 * the token up as over HTTP.
 */
import { parse } from 'graphql';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_UNAUTHORIZED } from '../../src/server/app.js';
import {
  AuthError,
  connectionRequests,
  openAssignmentStream,
  preferConnection,
  type AssignmentStream,
} from '../../src/agent/client.js';
import { createLogger } from '../../src/agent/log.js';
import { DOCUMENTS, OVER_CONNECTION, createApi } from '../../src/agent/operations.js';
import { runsOnConnectionIdentity } from '../../src/api/ws/connection-identity.js';
import { useTestApp } from '../helpers/app.js';
import { NOOP_METADATA } from '../helpers/fixtures.js';
import { collect, wsClient } from '../helpers/ws.js';

const t = useTestApp();
let url: string;
let aliceToken: string;
const disposers: (() => unknown)[] = [];

/** Workers registered by the test running: disabled after it, so that the next test's work goes to its own. */
const registered: string[] = [];

async function registerWorker(name: string): Promise<string> {
  const token = (
    await t.gql(
      `mutation($n: String!) { registerWorker(input: { name: $n }) { ... on WorkerTokenPayload { token } } }`,
      { n: name },
    )
  ).data!.registerWorker.token as string;
  await t.gql(
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: NOOP_METADATA },
    token,
  );
  registered.push(name);
  return token;
}

async function noop(): Promise<string> {
  const r = await t.gql(
    `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
    {},
    aliceToken,
  );
  return r.data!.createWorkRequest.id as string;
}

/** A worker's connection subscribed to its assignments, and a way to send operations over it. */
function connect(token: string) {
  const { client, closed } = wsClient(url, token);
  disposers.push(() => client.dispose());
  const assignments = collect<{ assignments: { id: string } }>(client, DOCUMENTS.assignments);
  const inFlight = connectionRequests();
  client.on('closed', (event) => inFlight.cutAll(event));
  const send = (query: string, variables: Record<string, unknown>) => inFlight.send(client, query, variables, 10_000);
  return { client, closed, assignments, send };
}

/** The agent's own assignment stream for a token, open (its connection acknowledged) when this resolves. */
async function openStream(httpUrl: string, token: string, pushed: string[]): Promise<AssignmentStream> {
  let connected!: () => void;
  const open = new Promise<void>((r) => (connected = r));
  const stream = openAssignmentStream({
    wsUrl: httpUrl.replace(/^http/, 'ws'),
    token,
    maxBackoffMs: 1000,
    keepAliveMs: 10_000,
    handshakeTimeoutMs: 5_000,
    requestTimeoutMs: 5_000,
    log: createLogger('silent'),
    onConnected: () => connected(),
    onAssignment: (a) => pushed.push(a.id),
    onFatal: () => undefined,
  });
  disposers.push(() => stream.close());
  await open;
  return stream;
}

beforeAll(async () => {
  ({ url } = await t.app.start());
  await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
  aliceToken = (
    await t.gql(`mutation { createUser(input: { username: "alice" }) { ... on UserTokenPayload { token } } }`)
  ).data!.createUser.token;
  await t.gql(`mutation { setWorkspaceMember(input: { workspace: "debian/main", username: "alice" }) { __typename } }`);
});
afterEach(async () => {
  for (const name of registered.splice(0))
    await t.gql(`mutation($n: String!) { disableWorker(input: { name: $n }) { __typename } }`, { n: name });
});
afterAll(async () => {
  for (const d of disposers) await d();
});

describe('which operations run as the connection’s worker', () => {
  const on = (q: string, name?: string) => runsOnConnectionIdentity(parse(q), name);
  it('the acknowledgement and the report, alone or together, with __typename', () => {
    expect(on(DOCUMENTS.startWorkRequest)).toBe(true);
    expect(on(DOCUMENTS.completeWorkRequest)).toBe(true);
    expect(
      on(
        `mutation { __typename a: startWorkRequest(input: { id: 1 }) { __typename } completeWorkRequest(input: { id: 1, result: SUCCESS }) { __typename } }`,
      ),
    ).toBe(true);
  });
  it('nothing else: another mutation beside them, a query, a subscription, a fragment at the root, __typename alone', () => {
    expect(
      on(`mutation { startWorkRequest(input: { id: 1 }) { __typename } heartbeat(input: {}) { __typename } }`),
    ).toBe(false);
    expect(on(DOCUMENTS.heartbeat)).toBe(false);
    expect(on(`{ me { __typename } }`)).toBe(false);
    expect(on(DOCUMENTS.assignments)).toBe(false);
    expect(on(`mutation { ...F } fragment F on Mutation { startWorkRequest(input: { id: 1 }) { __typename } }`)).toBe(
      false,
    );
    expect(on(`mutation { __typename }`)).toBe(false);
    // The operation named is the one judged.
    expect(
      on(
        `mutation A { startWorkRequest(input: { id: 1 }) { __typename } } mutation B { heartbeat(input: {}) { __typename } }`,
        'B',
      ),
    ).toBe(false);
    expect(
      on(
        `mutation A { startWorkRequest(input: { id: 1 }) { __typename } } mutation B { heartbeat(input: {}) { __typename } }`,
        'A',
      ),
    ).toBe(true);
  });
});

describe('start and complete over the worker’s connection', () => {
  it('acknowledges and reports its own assignment; another worker’s request does not exist to it', async () => {
    const token = await registerWorker('c1');
    const otherToken = await registerWorker('c2');
    const c = connect(token);
    await new Promise((r) => setTimeout(r, 200));
    await t.gql(`mutation { disableWorker(input: { name: "c2" }) { __typename } }`);
    const id = await noop();
    await t.app.scheduler.runPass();
    expect(await c.assignments.next(1)).toEqual([{ assignments: expect.objectContaining({ id }) }]);

    const started = await c.send(DOCUMENTS.startWorkRequest, { id });
    expect(started.startWorkRequest).toEqual({ __typename: 'WorkRequest', id, status: 'RUNNING' });
    // The other worker, on its own connection, cannot touch it.
    const other = connect(otherToken);
    await new Promise((r) => setTimeout(r, 200));
    const refused = await other.send(DOCUMENTS.completeWorkRequest, { id, r: 'SUCCESS', exitCode: 0 });
    expect(refused.completeWorkRequest).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });

    const done = await c.send(DOCUMENTS.completeWorkRequest, {
      id,
      r: 'SUCCESS',
      exitCode: 0,
      reason: null,
      statistics: null,
    });
    expect(done.completeWorkRequest).toEqual({ __typename: 'WorkRequest', id, status: 'COMPLETED' });
    const [row] = await t.sql(
      `select status, result, exit_code, w.name from work_request r join worker w on w.id = r.worker_id where r.id = ?`,
      [Number(id)],
    );
    expect(row).toEqual({ status: 'COMPLETED', result: 'SUCCESS', exit_code: 0, name: 'c1' });
    // A repeated report is answered as recorded, as over HTTP.
    const again = await c.send(DOCUMENTS.completeWorkRequest, { id, r: 'SUCCESS', exitCode: 0 });
    expect(again.completeWorkRequest).toEqual({ __typename: 'WorkRequest', id, status: 'COMPLETED' });
  });

  it.each([
    [
      'revoked in the database, with no event heard',
      (tokenId: number) => t.sql(`update token set revoked_at = now() where id = ?`, [tokenId]),
    ],
    [
      'its worker terminated',
      (tokenId: number) =>
        t.sql(`update worker set terminated_at = now() where id = (select worker_id from token where id = ?)`, [
          tokenId,
        ]),
    ],
    [
      'expired',
      (tokenId: number) => t.sql(`update token set expires_at = now() - interval '1 second' where id = ?`, [tokenId]),
    ],
  ])('refuses a token %s, and closes the connection with 4401', async (name, end) => {
    const worker = `gone-${name.length}`;
    const token = await registerWorker(worker);
    const c = connect(token);
    await new Promise((r) => setTimeout(r, 200));
    const id = await noop();
    await t.app.scheduler.runPass();
    await c.assignments.next(1);
    const [{ token_id: tokenId }] = await t.sql(
      `select t.id as token_id from token t join worker w on w.id = t.worker_id where w.name = ? and t.kind = 'worker'`,
      [worker],
    );
    await end(tokenId);
    const refused = c.send(DOCUMENTS.startWorkRequest, { id });
    await expect(refused).rejects.toBeInstanceOf(AuthError);
    expect((await c.closed).code).toBe(CLOSE_UNAUTHORIZED);
    const [row] = await t.sql(`select status from work_request where id = ?`, [Number(id)]);
    expect(row.status).toBe('ASSIGNED');
  });
});

describe('the agent’s choice of way', () => {
  it('sends start and complete over its stream’s connection once it is open, and over HTTP before and after', async () => {
    const token = await registerWorker('agent-way');
    const viaHttp: string[] = [];
    const http = async (query: string, variables?: Record<string, unknown>) => {
      viaHttp.push(query.split('(')[0]);
      const r = await t.gql(query, variables, token);
      return r.data as Record<string, unknown>;
    };
    let stream: AssignmentStream | null = null;
    const api = createApi(preferConnection(http, () => stream, OVER_CONNECTION));
    const pushed: string[] = [];
    const id = await noop();
    // No stream yet: the worker pulls its work, and acknowledges it over HTTP.
    const pulled = await t.gql(
      `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`,
      {},
      token,
    );
    expect(pulled.data!.requestWork.workRequest).toEqual({ id });
    const first = await api.startWorkRequest(id);
    expect(first).toEqual({ ok: true, value: { id, status: 'RUNNING' } });
    expect(viaHttp).toEqual(['mutation StartWorkRequest']);

    stream = await openStream(url, token, pushed);
    const done = await api.completeWorkRequest(id, 'SUCCESS', { exitCode: 0, reason: null });
    expect(done).toEqual({ ok: true, value: { id, status: 'COMPLETED' } });
    expect(viaHttp).toEqual(['mutation StartWorkRequest']); // the report went over the connection
    // Anything else still goes over HTTP.
    await api.heartbeat({ shuttingDown: false, running: [] });
    expect(viaHttp).toEqual(['mutation StartWorkRequest', 'mutation Heartbeat']);

    // Closed: over HTTP again.
    await stream.close();
    const next = await noop();
    const again = await t.gql(
      `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`,
      {},
      token,
    );
    expect(again.data!.requestWork.workRequest).toEqual({ id: next });
    expect(await api.startWorkRequest(next)).toEqual({ ok: true, value: { id: next, status: 'RUNNING' } });
    expect(viaHttp.at(-1)).toBe('mutation StartWorkRequest');
    expect(viaHttp).toHaveLength(3);
  });
});

describe('a connection at its limit of operations', () => {
  const small = useTestApp({ limits: { authFailuresPerMinute: 0, maxSubscriptionsPerConnection: 2 } });
  it('sends what the server refuses for the limit over HTTP at once, and every acknowledgement lands', async () => {
    const { url: smallUrl } = await small.app.start();
    await small.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const token = (
      await small.gql(
        `mutation { registerWorker(input: { name: "busy", concurrency: 8 }) { ... on WorkerTokenPayload { token } } }`,
      )
    ).data!.registerWorker.token as string;
    await small.gql(
      `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
      { m: NOOP_METADATA },
      token,
    );
    let viaHttp = 0;
    const http = async (query: string, variables?: Record<string, unknown>) => {
      viaHttp++;
      return (await small.gql(query, variables, token)).data as Record<string, unknown>;
    };
    const pushed: string[] = [];
    const stream = await openStream(smallUrl, token, pushed);
    const api = createApi(preferConnection(http, () => stream, OVER_CONNECTION));
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await small.gql(
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
      );
      ids.push(r.data!.createWorkRequest.id as string);
    }
    await small.app.scheduler.runPass();
    for (let i = 0; i < 100 && pushed.length < 8; i++) await new Promise((r) => setTimeout(r, 50));
    expect(pushed.sort()).toEqual([...ids].sort());
    // Eight at once on a connection that runs two operations (the subscription one of them).
    const answers = await Promise.all(ids.map((id) => api.startWorkRequest(id)));
    expect(answers).toEqual(ids.map((id) => ({ ok: true, value: { id, status: 'RUNNING' } })));
    expect(viaHttp).toBeGreaterThan(0);
    expect(viaHttp).toBeLessThan(8);
  });
});
