import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalEvents, createPgEvents, SUBSCRIPTION_BUFFER_EVENTS, type Events } from '../../src/events.js';
import { createTestDatabase } from '../helpers/db.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';

/** A subscription opened (its first next() is what subscribes) and not read until `read` is called. */
function open(events: Events) {
  const it = events.subscribe('workerChanged')[Symbol.asyncIterator]();
  const first = it.next();
  return {
    async read(n: number): Promise<number[]> {
      const ids = [(await first).value.id as number];
      while (ids.length < n) ids.push((await it.next()).value.id as number);
      return ids;
    },
    close: () => it.return?.(),
  };
}

const burst = (events: Events, from: number, n: number) => {
  for (let i = from; i < from + n; i++) events.publish('workerChanged', { id: i, name: `w-${i}` });
};
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describe('a burst of events (a stopping process, a mass disconnection) reaches every subscription whole', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('in one process: 5,000 events published at once, every one to each of two subscriptions, in order, and nothing logged', async () => {
    const cap = captureLog('debug');
    const events = createLocalEvents(cap.log);
    const a = open(events);
    const b = open(events);
    burst(events, 0, 5_000);
    expect(await a.read(5_000)).toEqual(range(0, 5_000));
    expect(await b.read(5_000)).toEqual(range(0, 5_000));
    await Promise.all([a.close(), b.close()]);
    expect(cap.lines()).toEqual([]);
  });

  it('across processes: 5,000 events that arrive in one NOTIFY statement, every one to each of two subscriptions, in order', async () => {
    const cap = captureLog('warn');
    const publisher = createPgEvents(db.url, cap.log);
    const listener = createPgEvents(db.url, cap.log);
    try {
      const a = open(listener);
      const b = open(listener);
      await listener.listening!();
      burst(publisher, 0, 5_000);
      expect(await a.read(5_000)).toEqual(range(0, 5_000));
      expect(await b.read(5_000)).toEqual(range(0, 5_000));
      await Promise.all([a.close(), b.close()]);
      expect(cap.lines().filter((l) => l.level >= LEVEL.warn)).toEqual([]);
    } finally {
      await publisher.close!();
      await listener.close!();
    }
  });

  it('a subscription more than the buffer behind keeps the newest events and says once that it dropped the oldest', async () => {
    const cap = captureLog('warn');
    const events = createLocalEvents(cap.log);
    const a = open(events);
    const over = 10;
    // The first event goes to the read already waiting; the buffer holds the rest.
    burst(events, 0, 1 + SUBSCRIPTION_BUFFER_EVENTS + over);
    const got = await a.read(1 + SUBSCRIPTION_BUFFER_EVENTS);
    expect(got[0]).toBe(0);
    expect(got.slice(1)).toEqual(range(1 + over, SUBSCRIPTION_BUFFER_EVENTS));
    await a.close();
    const warnings = cap.lines().filter((l) => l.level === LEVEL.warn);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ topic: 'workerChanged', held: SUBSCRIPTION_BUFFER_EVENTS });
  });
});
