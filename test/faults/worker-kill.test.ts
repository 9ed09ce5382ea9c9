import { describe, expect, it } from 'vitest';
import { alive, expectExactlyOnce, settled, states, until, useFleet, type Execution } from './harness.js';

// A worker agent SIGKILLed in the middle of a run: nobody tells the server, its handler dies with it
// (the watchdog), the heartbeat lease takes the work back, and another agent runs it; once the
// retries are used up the request is ABORTED with the reason instead.
const f = useFleet();

/** Waits until the agent has started `n` executions, and returns them. */
const startedOn = (agent: string, n = 1) =>
  until(`${n} execution(s) started on ${agent}`, () => {
    const runs = f.executions().filter((e) => e.agent === agent);
    return runs.length >= n && runs;
  });

const gone = (runs: Execution[]) =>
  until('the killed agent’s handlers to be gone', () => runs.every((r) => !alive(r.pid)));

describe.sequential('a worker killed mid-run', () => {
  it('re-queues what it ran after the heartbeat lease, and another agent runs each request exactly once', async () => {
    const server = await f.server({ TAGSCHED_MAX_RETRIES: '3' });
    try {
      // a takes two requests at once and would run them for ten minutes; b runs anything in 0.2 s.
      const a = await f.agent({ name: 'a', url: server.url, concurrency: 2, sleep: '600' });
      const b = await f.agent({ name: 'b', url: server.url });
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) ids.push(await f.createNoop(server.url));
      const onA = await startedOn('a');
      await a.kill();
      await gone(onA); // a build of a dead agent is not left running
      // Its socket closed without a word: the server marks it disconnected, so it gets nothing new.
      await until(
        'a to be marked disconnected',
        async () => (await f.sql(`select connected_at from worker where name = 'a'`))[0].connected_at === null,
      );
      const final = await settled(f, ids);
      expect(final.filter((s) => s.status !== 'COMPLETED' || s.worker !== 'b')).toEqual([]);
      expect(expectExactlyOnce(f, final, { killed: ['a'] })).toEqual({ completed: 8, aborted: 0 });
      // What a had started went back to the queue once, with the reason kept.
      for (const run of f.executions().filter((e) => e.agent === 'a')) {
        const s = final.find((x) => x.id === run.id)!;
        expect(s.retryCount).toBe(1);
        expect(s.statusReason).toMatch(/^worker a stopped heartbeating while running it; re-queued \(retry 1 of 3\)$/);
      }
      expect(b.logged('result dropped')).toEqual([]);
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('ABORTS a request with the reason once its retries are used up, and never runs it again', async () => {
    const server = await f.server({ TAGSCHED_MAX_RETRIES: '1' });
    try {
      const c = await f.agent({ name: 'c', url: server.url, sleep: '600' });
      const id = await f.createNoop(server.url);
      const onC = await startedOn('c');
      expect(onC.map((e) => e.id)).toEqual([id]);
      await c.kill();
      await gone(onC);
      await until('the request to be re-queued', async () => (await states(f, [id]))[0].retryCount === 1);

      // d takes it (retry 1 of 1) and is killed too: that was the last try.
      const d = await f.agent({ name: 'd', url: server.url, sleep: '600' });
      const onD = await startedOn('d');
      expect(onD.map((e) => e.id)).toEqual([id]);
      await d.kill();
      await gone(onD);
      const [s] = await settled(f, [id]);
      expect(s).toEqual({
        id,
        status: 'ABORTED',
        result: null,
        retryCount: 2,
        statusReason: 'worker d stopped heartbeating while running it (retry 2 of 1): aborted',
        worker: 'd',
      });
      expectExactlyOnce(f, [s], { killed: ['c', 'd'] });

      // A healthy agent then runs new work, never the aborted request.
      const e = await f.agent({ name: 'e', url: server.url });
      const next = await f.createNoop(server.url);
      const final = await settled(f, [id, next]);
      expect(final.map((x) => [x.status, x.worker])).toEqual([
        ['ABORTED', 'd'],
        ['COMPLETED', 'e'],
      ]);
      expectExactlyOnce(f, final, { killed: ['c', 'd'] });
      expect(e.logged('assignment received').map((l) => l.id)).toEqual([next]);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
