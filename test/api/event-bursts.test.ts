import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createLocalEvents,
  createPgEvents,
  SUBSCRIPTION_BUFFER_EVENTS,
  type Events,
} from '../../src/storage/events.js';
import { createTestDatabase } from '../helpers/db.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';

/** A subscription opened (its first next() is what subscribes) and not read until `read` or `values` is called. */
function open(events: Events) {
  const it = events.subscribe('workerChanged')[Symbol.asyncIterator]();
  let next: ReturnType<typeof it.next> | null = it.next();
  const values = async (n: number): Promise<unknown[]> => {
    const got: unknown[] = [];
    while (got.length < n) {
      got.push((await (next ?? it.next())).value);
      next = null;
    }
    return got;
  };
  return {
    values,
    read: async (n: number): Promise<number[]> => (await values(n)).map((v) => (v as { id: number }).id),
    close: () => it.return?.(),
  };
}

const burst = (events: Events, from: number, n: number) => {
  for (let i = from; i < from + n; i++) events.publish('workerChanged', { id: i, name: `w-${i}` });
};
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
/** The most a subscription takes whole: one event to the read already waiting, the rest held. */
const WHOLE = 1 + SUBSCRIPTION_BUFFER_EVENTS;

describe('a burst of events (a stopping process, a mass disconnection) reaches every subscription whole', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('in one process: a burst as large as the buffer, every event to each of two subscriptions, in order, and nothing logged', async () => {
    const cap = captureLog('debug');
    const events = createLocalEvents(cap.log);
    const a = open(events);
    const b = open(events);
    burst(events, 0, WHOLE);
    expect(await a.read(WHOLE)).toEqual(range(0, WHOLE));
    expect(await b.read(WHOLE)).toEqual(range(0, WHOLE));
    await Promise.all([a.close(), b.close()]);
    expect(cap.lines()).toEqual([]);
  });

  it('across processes: a burst as large as the buffer, in one NOTIFY statement, every event to each of two subscriptions, in order', async () => {
    const cap = captureLog('warn');
    const publisher = createPgEvents(db.url, cap.log);
    const listener = createPgEvents(db.url, cap.log);
    try {
      const a = open(listener);
      const b = open(listener);
      await listener.listening!();
      burst(publisher, 0, WHOLE);
      expect(await a.read(WHOLE)).toEqual(range(0, WHOLE));
      expect(await b.read(WHOLE)).toEqual(range(0, WHOLE));
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
      const b = open(elsewhere);
      await Promise.all([here.listening!(), elsewhere.listening!()]);
      burst(here, 0, 3);
      expect(await a.read(3)).toEqual([0, 1, 2]);
      // The other process heard them: PostgreSQL has sent them to every listening connection, this
      // process's too, before anything the other process publishes now.
      expect(await b.read(3)).toEqual([0, 1, 2]);
      burst(elsewhere, 100, 1);
      expect(await a.read(1)).toEqual([100]); // not one of ours a second time
      // Each listener hears a copy, as the other processes read it, without the process's mark: never
      // the publisher's object, which it may change after publishing.
      const published = { id: 7, name: 'w-7' };
      here.publish('workerChanged', published);
      published.name = 'changed after';
      expect(await a.values(1)).toEqual([{ id: 7, name: 'w-7' }]);
      expect(await b.values(2)).toEqual([
        { id: 100, name: 'w-100' },
        { id: 7, name: 'w-7' },
      ]);
      await Promise.all([a.close(), b.close()]);
    } finally {
      await here.close!();
      await elsewhere.close!();
    }
  });

  it("in one process too, each listener hears a copy of what was published, never the publisher's object", async () => {
    const events = createLocalEvents(captureLog('warn').log);
    const a = open(events);
    const b = open(events);
    const published = { id: 7, name: 'w-7' };
    events.publish('workerChanged', published);
    published.name = 'changed after';
    const [seenByA] = await a.values(1);
    const [seenByB] = await b.values(1);
    expect(seenByA).toEqual({ id: 7, name: 'w-7' });
    expect(seenByB).toEqual({ id: 7, name: 'w-7' });
    expect(seenByA).not.toBe(published);
    // Routed topics (a routing id before the payload) are copied too.
    const assigned = events.subscribe('workAssigned', '3')[Symbol.asyncIterator]();
    const next = assigned.next();
    const payload = { workRequestId: 1, workerId: 3 };
    events.publish('workAssigned', '3', payload);
    payload.workRequestId = 2;
    expect((await next).value).toEqual({ workRequestId: 1, workerId: 3 });
    await Promise.all([a.close(), b.close(), assigned.return?.()]);
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
