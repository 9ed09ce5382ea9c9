/**
 * PostgreSQL going away under load, shared by the two variants: every connection of the service to
 * its database terminated (pg-backends.test.ts, in `npm run test:processes`), and a real restart of the
 * PostgreSQL server (pg-restart.test.ts, alone, behind `npm run test:pg-restart`).
 */
import { expect, it } from 'vitest';
import { collect, wsClient } from '../helpers/ws.js';
import { expectExactlyOnce, settled, until, useFleet, type Fleet } from './harness.js';

/** Registers the test of one variant; `cut` breaks every connection the service has to PostgreSQL. */
export function pgOutageTests(cut: (f: Fleet) => Promise<void>): void {
  const f = useFleet();

  /** Retries like a client does until the service answers; a failed attempt may still have been written. */
  const retrying = <T>(what: string, fn: () => Promise<T>) => until(what, fn, 60_000, 200);

  it('under load: the service and its listener recover by themselves, no request is lost or run twice, and new work still reaches a subscribed worker through LISTEN/NOTIFY', async () => {
    // Lost pushes reach the agents with their next heartbeat (every second); the probe, which heartbeats
    // only once its push has arrived, gets a long ack lease, so that a slow machine does not take its
    // work back.
    const server = await f.server({ TAGSCHED_ACK_TIMEOUT_SECONDS: '30' });
    const agents = [
      await f.agent({ name: 'a', url: server.url, concurrency: 2, sleep: '0.3' }),
      await f.agent({ name: 'b', url: server.url, concurrency: 2, sleep: '0.3' }),
    ];

    // A probe: a server-type worker that runs only servernoop (the agents cannot), subscribed over a
    // WebSocket to a second server, which schedules nothing itself, and not heartbeating until its push
    // has arrived. Its assignment is made by the first server (a process hears its own events without
    // PostgreSQL), so it can only reach the probe as a push through NOTIFY and the second server's
    // LISTEN connection.
    const pushServer = await f.server({ TAGSCHED_ACK_TIMEOUT_SECONDS: '30', TAGSCHED_SCHEDULER: 'manual' }, 'push');
    const probeToken = (
      await f.gql(
        server.url,
        `mutation { registerWorker(input: { name: "probe", type: SERVER }) { ... on WorkerTokenPayload { token } } }`,
      )
    ).data!.registerWorker.token as string;
    const probe = wsClient(pushServer.url, probeToken);
    const pushed = collect<{ assignments: { id: string } }>(probe.client, `subscription { assignments { id } }`);
    try {
      const report = await f.gql(
        server.url,
        `mutation { reportWorkerMetadata(input: { metadata: { tasks: [{ type: "server", name: "servernoop", version: 1 }] } }) { ... on Worker { status } } }`,
        {},
        probeToken,
      );
      expect(report.data!.reportWorkerMetadata).toEqual({ status: 'IDLE' });
      const listenerUp = () =>
        [server, pushServer].map((s) => s.logs.filter((l) => l.msg === 'event listener connected').length);

      const ids: string[] = [];
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 10; i++)
          ids.push(await retrying('a request to be created', () => f.createNoop(server.url)));
        const before = listenerUp();
        await cut(f);
        await until('both servers’ event listeners to reconnect', () => listenerUp().every((n, i) => n > before[i]));
      }

      // After the cuts: new work is still assigned, and pushed.
      const after = [await f.createNoop(server.url), await f.createNoop(server.url)];
      const forProbe = (
        await f.gql(
          server.url,
          `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "server", taskName: "servernoop", taskData: {} }) { ... on WorkRequest { id } } }`,
        )
      ).data!.createWorkRequest.id as string;
      expect(await pushed.next(1, 60_000)).toEqual([{ assignments: { id: forProbe } }]);
      // Running work is the worker's only while it is heard from (TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS, 6
      // in these tests), and the probe was last heard from at its metadata report, before the cuts:
      // it heartbeats first, as an agent does, or the lease sweep could take its work back between
      // its start and its completion.
      const beat = await f.gql(server.url, `mutation { heartbeat(input: {}) { __typename } }`, {}, probeToken);
      expect(beat.data!.heartbeat).toEqual({ __typename: 'HeartbeatPayload' });
      for (const op of ['startWorkRequest', 'completeWorkRequest']) {
        const r = await f.gql(
          server.url,
          `mutation($id: ID!) { ${op}(input: { id: $id${op === 'completeWorkRequest' ? ', result: SUCCESS' : ''} }) { __typename } }`,
          { id: forProbe },
          probeToken,
        );
        expect(r.data![op]).toEqual({ __typename: 'WorkRequest' });
      }

      const final = await settled(f, [...ids, ...after]);
      expect(final.filter((s) => after.includes(s.id)).map((s) => s.status)).toEqual(['COMPLETED', 'COMPLETED']);
      // Whatever the database holds (a create whose answer was lost may have been written too) ran
      // exactly once; nothing was aborted.
      const everything = (await settled(f)).filter((s) => s.id !== forProbe);
      expect(everything.length).toBeGreaterThanOrEqual(ids.length + after.length);
      expect(expectExactlyOnce(f, everything)).toEqual({ completed: everything.length, aborted: 0 });
      for (const a of agents) expect(a.logged('result dropped'), a.name).toEqual([]);
      // The process survived, and answers.
      for (const s of [server, pushServer]) {
        expect(s.child.exitCode).toBeNull();
        expect(await (await fetch(new URL('/healthz', s.url))).json()).toEqual({ status: 'ok' });
      }
    } finally {
      pushed.dispose();
      await probe.client.dispose();
    }
  }, 150_000);
}
