import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalEvents, createPgEvents, SUBSCRIPTION_BUFFER_EVENTS, type Events } from '../../src/events.js';
import { createTestDatabase } from '../helpers/db.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';

/** A subscription opened (its first next() is what subscribes) and not read until `read` is called. */
function open(events: Events) {
  const it = events.subscribe('workerChanged')[Symbol.asyncIterator]();
  let next: ReturnType<typeof it.next> | null = it.next();
  return {
    async read(n: number): Promise<number[]> {
      const ids: number[] = [];
      while (ids.length < n) {
        ids.push((await (next ?? it.next())).value.id as number);
        next = null;
      }
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

  it('a process hears its own events once: at once when published, not again when PostgreSQL sends them back', async () => {
    const here = createPgEvents(db.url, captureLog('warn').log);
    const elsewhere = createPgEvents(db.url, captureLog('warn').log);
    try {
      const a = open(here);
      await here.listening!();
      burst(here, 0, 3);
      expect(await a.read(3)).toEqual([0, 1, 2]);
      // What another process publishes next comes through PostgreSQL, after this process's own
      // notifications: the next event read is it, not one of ours a second time.
      burst(elsewhere, 100, 1);
      expect(await a.read(1)).toEqual([100]);
      await a.close();
    } finally {
      await here.close!();
      await elsewhere.close!();
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
