import { describe, expect, it } from 'vitest';
import { wsClient } from '../helpers/ws.js';
import { expectExactlyOnce, settled, until, useFleet } from './harness.js';

// Two server processes on one database, both running passes (one at a time across processes, by an
// advisory lock): events cross them through PostgreSQL LISTEN/NOTIFY. Then one of them stops.
const f = useFleet();

describe('two server processes on one database', () => {
  it('a request created on one reaches an agent on the other and runs once; under load from both sides every request runs exactly once; one stopped leaves none of its workers connected', async () => {
    // No lease expires here (the test asserts no retry): on a loaded machine an acknowledgement can
    // take longer than the harness's 3 s, and that would be a re-queue, not a lost event.
    const env = { TAGSCHED_ACK_TIMEOUT_SECONDS: '60' };
    const [one, two] = await Promise.all([f.server(env, 'one'), f.server(env, 'two')]);
    const far = await f.agent({ name: 'far', url: two.url });
    const first = await f.createNoop(one.url);
    const [s] = await settled(f, [first]);
    expect(s).toMatchObject({ status: 'COMPLETED', worker: 'far', retryCount: 0 });
    expect(far.logged('assignment received').map((l) => l.id)).toEqual([first]);

    // Agents on both, requests created on both at once.
    const agents = [
      far,
      await f.agent({ name: 'near', url: one.url, concurrency: 2, sleep: '0.1' }),
      await f.agent({ name: 'also-far', url: two.url, concurrency: 2, sleep: '0.1' }),
    ];
    const ids = [first];
    for (let batch = 0; batch < 5; batch++) {
      ids.push(...(await Promise.all([0, 1, 2, 3, 4, 5].map((i) => f.createNoop((i % 2 ? one : two).url)))));
    }
    const final = await settled(f, ids);
    expect(expectExactlyOnce(f, final)).toEqual({ completed: ids.length, aborted: 0 });
    expect(final.filter((x) => x.retryCount > 0)).toEqual([]);
    for (const a of agents) expect(a.logged('result dropped'), a.name).toEqual([]);

    // One of them is stopped (SIGTERM): it records its workers as disconnected on the way out, so the
    // other never gives them work they cannot receive (which would wait for the ack lease, and cost a
    // retry). Many connections, so that recording them cannot just happen to beat the shutdown.
    const idle = await Promise.all(Array.from({ length: 40 }, (_, i) => f.registerWorker(one.url, `idle-${i}`)));
    const sockets = idle.map((token) => wsClient(one.url, token));
    try {
      await until(
        'the idle workers to be connected',
        async () =>
          (
            await f.sql(`select count(*)::int as n from worker where name like 'idle-%' and connected_at is not null`)
          )[0].n === idle.length,
      );
      expect(await one.stop()).toBe(0);
      expect(
        await f.sql(`select name from worker where (name like 'idle-%' or name = 'near') and connected_at is not null`),
      ).toEqual([]);
    } finally {
      await Promise.all(sockets.map((s) => s.client.dispose()));
    }
    const later = await Promise.all([0, 1, 2, 3].map(() => f.createNoop(two.url)));
    const afterStop = await settled(f, later);
    expect(expectExactlyOnce(f, afterStop)).toEqual({ completed: 4, aborted: 0 });
    expect(afterStop.filter((x) => x.retryCount > 0 || x.worker === 'near')).toEqual([]);
  }, 120_000);
});
