import { describe, expect, it } from 'vitest';
import { collect, wsClient } from '../helpers/ws.js';
import { ADMIN, expectExactlyOnce, settled, states, until, useFleet } from './harness.js';

// The network between an agent and the server fails, the server stays up: a TCP proxy in between
// resets the connections (and refuses new ones for a while), or silently stops passing anything on
// the open ones. The agent's WebSocket and its HTTP calls both go through the proxy.
const f = useFleet();

// The leases are longer than the outages here: an agent that comes back in time keeps its work.
const env = { TAGSCHED_ACK_TIMEOUT_SECONDS: '30', TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS: '15' };

describe.sequential('a cut connection', () => {
  it('under a running agent: it reconnects and reports its run, and nothing is assigned twice meanwhile', async () => {
    const server = await f.server(env);
    const proxy = await f.proxy(server.port);
    const a = await f.agent({ name: 'a', url: proxy.urlFor(server.url), sleep: '4' });
    const running = await f.createNoop(server.url);
    await until('a to run it', () => f.executions().some((e) => e.id === running && e.agent === 'a'));
    // Everything that happens to this request, seen by the admin straight from the server.
    const admin = wsClient(server.url, ADMIN);
    const changes = collect<{ workRequestChanged: { status: string; worker: { name: string } | null } }>(
      admin.client,
      `subscription($id: ID!) { workRequestChanged(id: $id) { status worker { name } } }`,
      { id: running },
    );
    try {
      // b is idle and connected directly: it would take the request if the server let it go.
      const b = await f.agent({ name: 'b', url: server.url });
      await proxy.close(); // reset, and refuse new connections
      await a.waitForLog('disconnected');
      await until(
        'the server to see a disconnected',
        async () => (await f.sql(`select connected_at from worker where name = 'a'`))[0].connected_at === null,
      );
      // Meanwhile new work goes to b only.
      const meanwhile = [await f.createNoop(server.url), await f.createNoop(server.url)];
      const cutAt = a.logs.length;
      await until(
        'a to try again twice',
        () => a.logs.slice(cutAt).filter((l) => l.msg === 'reconnecting').length >= 2,
      );
      // Each attempt says why the one before failed: the proxy refuses connections now.
      for (const line of a.logs.slice(cutAt).filter((l) => l.msg === 'reconnecting'))
        expect(String(line.cause)).toMatch(/ECONNREFUSED|refused|closed/);
      await proxy.reopen();
      await a.waitForLog('connected', (l) => l.reconnect === true);

      const final = await settled(f, [running, ...meanwhile]);
      expect(final.map((s) => [s.id, s.status, s.worker, s.retryCount])).toEqual([
        [running, 'COMPLETED', 'a', 0],
        [meanwhile[0], 'COMPLETED', 'b', 0],
        [meanwhile[1], 'COMPLETED', 'b', 0],
      ]);
      expectExactlyOnce(f, final);
      await a.waitForLog('result reported', (l) => l.id === running);
      expect(b.logged('assignment received').map((l) => l.id)).toEqual(meanwhile);
      // Whatever the request went through, it never had another worker.
      await until('the admin to see it completed', () =>
        changes.items.some((c) => c.workRequestChanged.status === 'COMPLETED'),
      );
      expect(changes.items.filter((c) => c.workRequestChanged.worker?.name !== 'a')).toEqual([]);
      expect(changes.items.at(-1)).toEqual({ workRequestChanged: { status: 'COMPLETED', worker: { name: 'a' } } });
    } finally {
      changes.dispose();
      await admin.client.dispose();
    }
  }, 120_000);

  it('silently (nothing passes, nobody is told): the agent notices by its keep-alive, reconnects and gets the push it lost; it runs once', async () => {
    const server = await f.server(env);
    const proxy = await f.proxy(server.port);
    const c = await f.agent({ name: 'c', url: proxy.urlFor(server.url) });
    expect(proxy.blackhole()).toBeGreaterThan(0);
    // To the server c is connected and idle: it assigns and pushes into the void.
    const id = await f.createNoop(server.url);
    await until('the request to be assigned to c', async () => (await states(f, [id]))[0].worker === 'c');
    await c.waitForLog('no answer to a ping: the connection counts as cut');
    await c.waitForLog('connected', (l) => l.reconnect === true);
    const [s] = await settled(f, [id]);
    expect(s).toMatchObject({ status: 'COMPLETED', worker: 'c', retryCount: 0 });
    expectExactlyOnce(f, [s]);
    expect(c.logged('assignment received').map((l) => l.id)).toEqual([id]);
  }, 120_000);

  it('losing the answer to a result: the agent reports it again, and the server takes the repeat as the same report', async () => {
    const server = await f.server(env);
    const proxy = await f.proxy(server.port);
    const d = await f.agent({ name: 'd', url: proxy.urlFor(server.url), sleep: '1' });
    const id = await f.createNoop(server.url);
    await until('d to run it', () => f.executions().some((e) => e.id === id && e.agent === 'd'));
    proxy.dropAnswers(true);
    // The report arrives and is recorded; its answer never comes back, and the agent tries again.
    await until('the server to have the result', async () => (await states(f, [id]))[0].status === 'COMPLETED');
    await d.waitForLog('retrying', (l) => l.operation === 'completeWorkRequest' && l.id === id);
    proxy.dropAnswers(false);
    const outcome = await until('d to hear back', () =>
      d.logs.find((l) => l.id === id && (l.msg === 'result reported' || l.msg === 'result dropped')),
    );
    expect(outcome).toMatchObject({ msg: 'result reported', result: 'SUCCESS' });
    const [s] = await settled(f, [id]);
    expect(s).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS', worker: 'd', retryCount: 0 });
    expectExactlyOnce(f, [s]);
    // The same worker reporting another result for it is still refused.
    const other = await f.gql(
      server.url,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: FAILURE }) { __typename ... on Error { code } } }`,
      { id },
      d.token,
    );
    expect(other.data!.completeWorkRequest).toEqual({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
  }, 120_000);
});
