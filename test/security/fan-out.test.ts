import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { AMD64_METADATA, connectedWorker, createPool, createUser, reportMetadata } from '../helpers/fixtures.js';
import { captureLog } from '../helpers/log-capture.js';
import { collect, wsClient } from '../helpers/ws.js';

// Subscription fan-out: an event is loaded once per process, whatever the number of its subscribers,
// and each subscriber is sent what its own viewer may see. The statements are counted from the ORM's
// own query log (at debug level the app logs every statement, never its parameters).
const capture = captureLog('debug');
// The provisioner's passes (retirements run even with it off) are kept out of the counted window: they
// follow worker events after a debounce and would add their own statements to one count or the other.
const t = useTestApp(
  { provisioner: { cycleDebounceMs: 10 * 60_000, cycleIntervalMs: 10 * 60_000 } },
  { log: () => capture.log },
);
let url: string;
let workerToken: string;
const clients: { dispose(): void | Promise<void> }[] = [];

const SELECTION = `subscription { workerChanged(name: "fan-w") { name status activeWorkCount pool { name } providedTags { tag } } }`;

const statementsSince = (from: number) =>
  capture
    .lines()
    .slice(from)
    .filter((l) => (l as { orm?: boolean }).orm && l.msg.includes('[query]'));

async function quiet(): Promise<void> {
  for (let before = -1; before !== capture.mark();) {
    before = capture.mark();
    await new Promise((r) => setTimeout(r, 150));
  }
}

/** Opens `n` subscribers (anonymous and with a user token, half each) and returns them once listening. */
async function subscribers(n: number, userTokens: string[]) {
  const subs = [];
  for (let i = 0; i < n; i++) {
    const { client } = wsClient(url, i % 2 === 0 ? null : userTokens[i % userTokens.length]);
    clients.push(client);
    subs.push(collect(client, SELECTION));
  }
  await listening(subs);
  return subs;
}

/**
 * Waits until every subscription hears the worker's events: reports of the worker, one after another,
 * until one has reached all of them (a fixed wait was too short on a loaded machine, and the statements
 * of a subscription still starting were then counted as the event's).
 */
async function listening(subs: ReturnType<typeof collect>[]): Promise<void> {
  for (let cpu = 100; cpu < 160; cpu++) {
    const before = subs.map((s) => s.items.length);
    await reportMetadata(t, workerToken, { ...AMD64_METADATA, cpuCount: cpu });
    const heard = await Promise.all(
      subs.map((s, i) =>
        s.next(before[i] + 1, 2_000).then(
          () => true,
          () => false,
        ),
      ),
    );
    if (heard.every(Boolean)) return;
  }
  throw new Error('the subscriptions never all heard an event');
}

/** The statements the service sends for one report of the worker and its delivery to every subscriber. */
async function statementsOfOneEvent(subs: ReturnType<typeof collect>[], cpu: number): Promise<string[]> {
  await quiet();
  const from = capture.mark();
  const before = subs.map((s) => s.items.length);
  await reportMetadata(t, workerToken, { ...AMD64_METADATA, cpuCount: cpu });
  await Promise.all(subs.map((s, i) => s.next(before[i] + 1, 20_000)));
  await quiet();
  return statementsSince(from).map((l) => l.msg);
}

beforeAll(async () => {
  ({ url } = await t.app.start());
  await createPool(t, { name: 'fan-pool' });
  workerToken = await connectedWorker(t, 'fan-w', { pool: 'fan-pool' });
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
});

describe('workerChanged with many subscribers', () => {
  it('costs the same statements for 40 subscribers of 20 users as for 4 of 2', async () => {
    const users = [await createUser(t, 'fan-u1'), await createUser(t, 'fan-u2')];
    const few = await subscribers(4, users);
    const withFew = await statementsOfOneEvent(few, 5);
    const more: string[] = [];
    for (let i = 0; i < 18; i++) more.push(await createUser(t, `fan-m${i}`));
    const many = [...few, ...(await subscribers(36, more))];
    const withMany = await statementsOfOneEvent(many, 6);
    console.info(
      `statements for one workerChanged event: ${withFew.length} with 4 subscribers, ${withMany.length} with 40`,
    );
    expect(withMany.length).toBe(withFew.length);
    for (const s of many) {
      expect(s.items.at(-1)).toMatchObject({
        workerChanged: { name: 'fan-w', pool: { name: 'fan-pool' }, activeWorkCount: 0 },
      });
    }
  });

  it('still sends each subscriber only what its token allows: a revoked one among many gets nothing more', async () => {
    const users = [await createUser(t, 'fan-u3')];
    const subs = await subscribers(6, users);
    await statementsOfOneEvent(subs, 7);
    await t.sql(
      `update token set revoked_at = now() where user_id = (select id from app_user where username = 'fan-u3')`,
    );
    const anonymous = subs.filter((_, i) => i % 2 === 0);
    const counts = subs.map((s) => s.items.length);
    await reportMetadata(t, workerToken, { ...AMD64_METADATA, cpuCount: 8 });
    await Promise.all(anonymous.map((s) => s.next(counts[subs.indexOf(s)] + 1, 20_000)));
    await quiet();
    subs.forEach((s, i) => expect(s.items.length).toBe(counts[i] + (i % 2 === 0 ? 1 : 0)));
  });
});
