/**
 * Events between processes (storage/events.ts) as PostgreSQL carries them: one channel per topic with
 * the routing key in the payload, so that a process LISTENs to a handful of channels however many
 * workers it holds; log appends folded by request over a short window; and a payload longer than a
 * notification takes sent in fragments (or, past EVENT_MAX_BYTES, refused alone), never taking the
 * events published with it down.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COALESCED_TOPICS, createPgEvents, EVENT_MAX_BYTES, type Events } from '../../src/storage/events.js';
import { createTestDatabase } from '../helpers/db.js';
import { captureLog, LEVEL } from '../helpers/log-capture.js';

let db: Awaited<ReturnType<typeof createTestDatabase>>;
/** A plain session of the test's own, which LISTENs to the events' channels to see the notifications themselves. */
let raw: pg.Client;
const heard: { channel: string; payload: string }[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  raw = new pg.Client({ connectionString: db.url });
  await raw.connect();
  raw.on('notification', (m) => heard.push({ channel: m.channel, payload: m.payload ?? '' }));
});
afterAll(async () => {
  await raw?.end();
  await db?.drop();
});

/** The next `n` values of a stream. */
async function take<T>(it: AsyncIterator<T>, n: number): Promise<T[]> {
  const got: T[] = [];
  while (got.length < n) got.push((await it.next()).value as T);
  return got;
}

/** Two processes' events on the test's database (with a log each), closed after `body`. */
async function twoProcesses(
  body: (here: Events, elsewhere: Events, logs: ReturnType<typeof captureLog>[]) => Promise<void>,
) {
  const logs = [captureLog('debug'), captureLog('debug')];
  const here = createPgEvents(db.url, logs[0]!.log);
  const elsewhere = createPgEvents({ pool: db.url, session: db.url }, logs[1]!.log);
  try {
    await body(here, elsewhere, logs);
  } finally {
    await here.close!();
    await elsewhere.close!();
  }
}

const settle = () => new Promise((r) => setTimeout(r, 200));

describe('events between processes', () => {
  it('one channel per topic, the routing key in the payload: each subscription hears its own key only', async () => {
    await raw.query('LISTEN "tagsched:topic:workAssigned"');
    heard.length = 0;
    await twoProcesses(async (here, elsewhere) => {
      const seven = elsewhere.subscribe('workAssigned', '7')[Symbol.asyncIterator]();
      const eight = elsewhere.subscribe('workAssigned', '8')[Symbol.asyncIterator]();
      const first7 = seven.next();
      const first8 = eight.next();
      await elsewhere.listening!();
      here.publish('workAssigned', '8', { workRequestId: 1, workerId: 8 });
      here.publish('workAssigned', '7', { workRequestId: 2, workerId: 7 });
      here.publish('workAssigned', '8', { workRequestId: 3, workerId: 8 });
      expect((await first7).value).toEqual({ workRequestId: 2, workerId: 7 });
      expect([(await first8).value, ...(await take(eight, 1))]).toEqual([
        { workRequestId: 1, workerId: 8 },
        { workRequestId: 3, workerId: 8 },
      ]);
      await Promise.all([seven.return?.(), eight.return?.()]);
      await settle();
    });
    // What went through PostgreSQL: on the topic's one channel, each event with its key.
    const entries = heard.flatMap((h) => {
      expect(h.channel).toBe('tagsched:topic:workAssigned');
      return (JSON.parse(h.payload) as { e: [string, unknown][] }).e;
    });
    expect(entries).toEqual([
      ['8', { workRequestId: 1, workerId: 8 }],
      ['7', { workRequestId: 2, workerId: 7 }],
      ['8', { workRequestId: 3, workerId: 8 }],
    ]);
    await raw.query('UNLISTEN *');
  });

  it('fromAnotherProcess: true for what another process published, false for what this one did', async () => {
    await twoProcesses(async (here, elsewhere) => {
      const there = elsewhere.subscribe('workerChanged')[Symbol.asyncIterator]();
      const mine = here.subscribe('workerChanged')[Symbol.asyncIterator]();
      const [fromHere, atHome] = [there.next(), mine.next()];
      await Promise.all([here.listening!(), elsewhere.listening!()]);
      here.publish('workerChanged', { id: 4, name: 'w4' });
      const [heardThere, heardHere] = [(await fromHere).value, (await atHome).value];
      expect(heardThere).toEqual({ id: 4, name: 'w4' });
      expect(heardHere).toEqual({ id: 4, name: 'w4' });
      expect(elsewhere.fromAnotherProcess!(heardThere)).toBe(true);
      expect(here.fromAnotherProcess!(heardHere)).toBe(false);
      // An object never heard through PostgreSQL, and a value that is not an object, are this process's.
      expect(elsewhere.fromAnotherProcess!({ id: 4, name: 'w4' })).toBe(false);
      expect(elsewhere.fromAnotherProcess!('4')).toBe(false);
      await Promise.all([there.return?.(), mine.return?.()]);
    });
  });

  it("log appends: this process's listeners hear each at once, the others the newest of each request, in one notification", async () => {
    expect(COALESCED_TOPICS.workRequestLogAppended).toBeGreaterThan(0);
    await raw.query('LISTEN "tagsched:topic:workRequestLogAppended"');
    heard.length = 0;
    await twoProcesses(async (here, elsewhere) => {
      const local = here.subscribe('workRequestLogAppended', '5')[Symbol.asyncIterator]();
      const remote5 = elsewhere.subscribe('workRequestLogAppended', '5')[Symbol.asyncIterator]();
      const remote6 = elsewhere.subscribe('workRequestLogAppended', '6')[Symbol.asyncIterator]();
      const firsts = [local.next(), remote5.next(), remote6.next()];
      await Promise.all([here.listening!(), elsewhere.listening!()]);
      for (let i = 1; i <= 40; i++) {
        here.publish('workRequestLogAppended', '5', { id: 5, totalBytes: i * 100 });
        if (i % 10 === 0) here.publish('workRequestLogAppended', '6', { id: 6, totalBytes: i });
      }
      const [l, r5, r6] = await Promise.all(firsts);
      expect([l!.value, ...(await take(local, 39))].map((v) => v.totalBytes)).toEqual(
        Array.from({ length: 40 }, (_, i) => (i + 1) * 100),
      );
      expect(r5!.value).toEqual({ id: 5, totalBytes: 4000 });
      expect(r6!.value).toEqual({ id: 6, totalBytes: 40 });
      // Nothing more comes for either: the earlier appends were folded into these.
      here.publish('workRequestLogAppended', '5', { id: 5, totalBytes: 4100 });
      expect((await remote5.next()).value).toEqual({ id: 5, totalBytes: 4100 });
      await Promise.all([local.return?.(), remote5.return?.(), remote6.return?.()]);
      await settle();
    });
    expect(heard.map((h) => (JSON.parse(h.payload) as { e: unknown[] }).e)).toEqual([
      [
        ['5', { id: 5, totalBytes: 4000 }],
        ['6', { id: 6, totalBytes: 40 }],
      ],
      [['5', { id: 5, totalBytes: 4100 }]],
    ]);
    await raw.query('UNLISTEN *');
  });

  it('a payload longer than a notification goes in fragments, one too large for any is refused alone: the events around them arrive, in order', async () => {
    await twoProcesses(async (here, elsewhere, logs) => {
      const workers = elsewhere.subscribe('workerChanged')[Symbol.asyncIterator]();
      const revoked = elsewhere.subscribe('tokensRevoked')[Symbol.asyncIterator]();
      const firstWorker = workers.next();
      const firstRevoked = revoked.next();
      await elsewhere.listening!();
      const manyIds = Array.from({ length: 5_000 }, (_, i) => 1_000_000 + i); // some 40 kB of JSON
      const longName = `w-${'é"\n'.repeat(6_000)}`; // escaped and multi-byte: far more bytes than characters
      here.publish('workerChanged', { id: 1, name: 'w-1' });
      here.publish('tokensRevoked', { tokenIds: manyIds });
      here.publish('workerChanged', { id: 2, name: longName });
      here.publish('workerChanged', { id: 3, name: 'x'.repeat(EVENT_MAX_BYTES) }); // too large: refused
      here.publish('workerChanged', { id: 4, name: 'w-4' });
      expect((await firstRevoked).value).toEqual({ tokenIds: manyIds });
      expect([(await firstWorker).value, ...(await take(workers, 2))]).toEqual([
        { id: 1, name: 'w-1' },
        { id: 2, name: longName },
        { id: 4, name: 'w-4' },
      ]);
      await Promise.all([workers.return?.(), revoked.return?.()]);
      const warnings = logs[0]!.lines().filter((l) => l.level >= LEVEL.warn);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({
        msg: 'event too large for the other processes: only this one heard it',
        type: 'workerChanged',
        maxBytes: EVENT_MAX_BYTES,
      });
      expect(logs[1]!.lines().filter((l) => l.level >= LEVEL.warn)).toEqual([]);
    });
  });

  it('a notification that is not an event is logged and passed over; the next event is heard', async () => {
    await twoProcesses(async (here, elsewhere, logs) => {
      const workers = elsewhere.subscribe('workerChanged')[Symbol.asyncIterator]();
      const first = workers.next();
      await elsewhere.listening!();
      await raw.query(`select pg_notify('tagsched:topic:workerChanged', 'not json')`);
      await raw.query(`select pg_notify('tagsched:topic:workerChanged', '{"o":"someone","e":[[1,2,3]]}')`);
      await settle();
      here.publish('workerChanged', { id: 9, name: 'w-9' });
      expect((await first).value).toEqual({ id: 9, name: 'w-9' });
      await workers.return?.();
      expect(logs[1]!.lines().filter((l) => l.msg === 'bad event payload')).toHaveLength(2);
    });
  });
});
