import { describe, expect, it } from 'vitest';
import { expectExactlyOnce, settled, states, until, useFleet } from './harness.js';

// The server SIGKILLed between an assignment and its acknowledgement, for longer than a lease, and
// again and again under load. Agents reach the server through a TCP proxy, so that a restarted
// server (on a new port) is at the same address. To hold an assignment unacknowledged for as long as
// the test needs, its agent is SIGSTOPped before the request is created: the server assigns and
// pushes to a connected worker that cannot answer.
const f = useFleet();

const assignedTo = (id: string, worker: string) =>
  until(`request ${id} to be assigned to ${worker}`, async () => {
    const [s] = await states(f, [id]);
    return s.status === 'ASSIGNED' && s.worker === worker;
  });

describe.sequential('a server killed', () => {
  it('between assignment and acknowledgement: after the restart the assignment is delivered again, and runs once', async () => {
    // A long ack timeout: the restarted server must not need the lease to get the work done.
    const env = { TAGSCHED_ACK_TIMEOUT_SECONDS: '600' };
    const s1 = await f.server(env, 's1');
    const proxy = await f.proxy(s1.port);
    const a = await f.agent({ name: 'a', url: proxy.urlFor(s1.url) });
    a.signal('SIGSTOP');
    const id = await f.createNoop(s1.url);
    await assignedTo(id, 'a');
    await s1.kill();
    const s2 = await f.server(env, 's2');
    proxy.retarget(s2.port);
    a.signal('SIGCONT');
    const [s] = await settled(f, [id]);
    expect(s).toMatchObject({ status: 'COMPLETED', worker: 'a', retryCount: 0 });
    expectExactlyOnce(f, [s]);
    await a.waitForLog('connected', (l) => l.reconnect === true);
  }, 120_000);

  it('with the assignee gone too: the restarted server takes the assignment back, and another agent runs it once', async () => {
    const s1 = await f.server({}, 's3');
    const proxy = await f.proxy(s1.port);
    const b = await f.agent({ name: 'b', url: proxy.urlFor(s1.url) });
    b.signal('SIGSTOP');
    const id = await f.createNoop(s1.url);
    await assignedTo(id, 'b');
    // The server and the machine of its worker die together: nobody ever closes b's connection,
    // so the restarted server finds b "connected", and must not keep giving it the work back.
    await s1.kill();
    await b.kill();
    const s2 = await f.server({}, 's4');
    await f.agent({ name: 'c', url: s2.url });
    const [s] = await settled(f, [id]);
    expect(s).toMatchObject({ status: 'COMPLETED', worker: 'c', retryCount: 1 });
    expect(s.statusReason).toBe('worker b did not acknowledge the assignment in time; re-queued (retry 1 of 3)');
    expectExactlyOnce(f, [s]);
    expect((await f.sql(`select connected_at from worker where name = 'b'`))[0].connected_at).toBeNull();
  }, 120_000);

  it('for longer than the heartbeat lease: the restarted server does not take running work from agents that could not reach it', async () => {
    const s1 = await f.server({}, 'down-0');
    const proxy = await f.proxy(s1.port);
    const url = proxy.urlFor(s1.url);
    const p = await f.agent({ name: 'p', url, sleep: '20' });
    const id = await f.createNoop(s1.url);
    await until('p to run the request', () => f.executions().some((e) => e.id === id && e.agent === 'p'));
    await f.agent({ name: 'q', url }); // idle: it would take the request if it were re-queued
    await s1.kill();
    await proxy.close();
    // Down for longer than the lease (6 s): p has not been heard from for longer than that.
    await until(
      'p to be silent for longer than the heartbeat lease',
      async () =>
        (await f.sql(`select now() - last_seen_at > interval '7 seconds' as silent from worker where name = 'p'`))[0]
          .silent,
    );
    const s2 = await f.server({}, 'down-1');
    proxy.retarget(s2.port);
    // The network comes back a little after the server, once its periodic sweeps (every 1 s) have run.
    await new Promise((r) => setTimeout(r, 2_500));
    await proxy.reopen();
    const [s] = await settled(f, [id]);
    expect(s).toMatchObject({ status: 'COMPLETED', worker: 'p', retryCount: 0 });
    expectExactlyOnce(f, [s]);
    expect(p.logged('result dropped')).toEqual([]);
  }, 120_000);

  it('again and again under load: every request runs exactly once', async () => {
    // The test asserts that no request needed a lease. A lost assignment would still need the ack
    // lease (here 30 s) and so show as a retry; but on a loaded machine an agent's acknowledgement
    // after a restart can take longer than the harness's 3 s, which is a re-queue, not a lost event.
    const env = { TAGSCHED_ACK_TIMEOUT_SECONDS: '30' };
    let server = await f.server(env, 'load-0');
    const proxy = await f.proxy(server.port);
    const url = proxy.urlFor(server.url);
    const agents = [
      await f.agent({ name: 'x', url, concurrency: 2, sleep: '1.5' }),
      await f.agent({ name: 'y', url, concurrency: 2, sleep: '1.5' }),
    ];
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await f.createNoop(server.url));
    for (let round = 1; round <= 2; round++) {
      // Killed while work is assigned and running, and some already done: both are checked in one
      // look, and each run takes long enough (1.5 s on 4 slots) that the work cannot all finish
      // between them.
      const doneBefore = f.executions().filter((e) => e.done).length;
      let seen = '';
      await until(
        () => `more work to finish, and work in flight, in round ${round} (last seen: ${seen})`,
        async () => {
          const done = f.executions().filter((e) => e.done).length;
          const now = await states(f, ids);
          seen = `${done - doneBefore} more done; ${now.map((s) => s.status).join(' ')}`;
          return done >= doneBefore + 2 && now.some((s) => s.status === 'RUNNING' || s.status === 'ASSIGNED');
        },
      );
      await server.kill();
      server = await f.server(env, `load-${round}`);
      proxy.retarget(server.port);
      for (let i = 0; i < 6; i++) ids.push(await f.createNoop(server.url));
    }
    const final = await settled(f, ids);
    expect(expectExactlyOnce(f, final)).toEqual({ completed: ids.length, aborted: 0 });
    expect(final.filter((s) => s.retryCount > 0)).toEqual([]); // nothing needed a lease: the agents came back in time
    for (const a of agents) expect(a.logged('result dropped'), a.name).toEqual([]);
  }, 150_000);
});
