/**
 * Leadership across two server processes on one database (docs/operating/replicas.md, "Leadership"):
 * each duty has one leader, shown by Query.leaders (admins only) and by each process's
 * tagsched_leader gauge; a leader that stops gives its leases up and the other process takes them at
 * once, in the next term; a hold that is not renewed in time is given up by its holder by itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/server/app.js';
import { createLeadership } from '../../src/loops/leadership.js';
import { createLocalEvents } from '../../src/storage/events.js';
import { createLogger } from '../../src/core/log.js';
import { startSecondApp, useTestApp } from '../helpers/app.js';
import { registerWorker } from '../helpers/fixtures.js';

// A long lease (renewed every 6 s, expiring after 30 s): a takeover within seconds comes from the lease given up.
const settings = { leases: { leaderLeaseMs: 30_000 }, serverWorkers: { count: 0 } };
const t = useTestApp(settings);
let a: App;
let b: App | null = null;

beforeAll(async () => {
  a = await startSecondApp(t, settings);
});
afterAll(async () => {
  await b?.stop();
});

const LEADERS = `{ leaders { duty holder term since renewedAt expiresAt held } }`;
type Leader = { duty: string; holder: string; term: number; held: boolean };
const leaders = async (): Promise<Leader[]> => (await t.gql<{ leaders: Leader[] }>(LEADERS)).data!.leaders;
const until = async <T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> => {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`timed out; last: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};
/** The tagsched_leader gauge of a process, by duty. */
const gauge = async (app: App): Promise<Record<string, number>> => {
  const text = await app.metrics.registry.getSingleMetricAsString('tagsched_leader');
  return Object.fromEntries([...text.matchAll(/^tagsched_leader\{duty="([^"]+)"\} (\d)$/gm)].map((m) => [m[1], +m[2]]));
};

describe('leadership', () => {
  it('each duty has one leader, shown to admins and in each process’s /metrics', async () => {
    const host = `provisioner@${a.config.server.hostName}`;
    const held = await until(leaders, (ls) =>
      ['chores', 'provisioner', host].every((d) => ls.some((l) => l.duty === d)),
    );
    for (const l of held) expect(l).toMatchObject({ holder: a.config.server.processName, held: true, term: 1 });
    b = await startSecondApp(t, settings);
    await new Promise((r) => setTimeout(r, 300)); // B has tried for every duty
    const [ga, gb] = [await gauge(a), await gauge(b)];
    for (const duty of ['chores', 'provisioner', host]) {
      expect(ga[duty]).toBe(1);
      expect(gb[duty]).toBe(0);
    }
  });

  it('is not shown to anonymous callers or workers', async () => {
    const anonymous = await t.gql(LEADERS, {}, null);
    expect(anonymous.data).toBeNull();
    expect(anonymous.errors?.[0].extensions?.code).toBe('UNAUTHENTICATED');
    const worker = await t.gql(LEADERS, {}, await registerWorker(t, 'lead-curious'));
    expect(worker.data).toBeNull();
    expect(worker.errors?.[0].extensions?.code).toBe('FORBIDDEN');
  });

  it('a leader that stops gives its leases up: the other process takes each at once, in the next term', async () => {
    const stoppedAt = Date.now();
    await a.stop();
    const taken = await until(leaders, (ls) => ls.every((l) => l.holder === b!.config.server.processName && l.held));
    // Long before the 30 s after which the lease would have expired by itself.
    expect(Date.now() - stoppedAt).toBeLessThan(5_000);
    for (const l of taken) expect(l.term).toBe(2);
    const gb = await gauge(b!);
    expect(Object.values(gb).every((v) => v === 1)).toBe(true);
  });

  it('a hold not renewed within two thirds of its lease is given up by its holder, with its signal', async () => {
    const leadership = createLeadership({
      orm: t.app.orm,
      events: createLocalEvents(),
      log: createLogger('silent'),
      holder: 'lone-holder',
      leaseMs: 1_500,
    });
    // claim() without follow(): taken once, never renewed.
    const hold = await leadership.claim('test-duty');
    expect(hold).not.toBeNull();
    expect(leadership.held('test-duty')).toBe(hold);
    await new Promise((r) => setTimeout(r, 1_200));
    expect(hold!.valid()).toBe(false);
    expect(hold!.lost.aborted).toBe(true);
    expect(leadership.held('test-duty')).toBeNull();
    // The database still has it until the lease's end: no one else could have taken it before the holder let go.
    const [row] = await t.sql<{ alive: boolean }>(
      `select expires_at > now() as alive from leader_lease where duty = 'test-duty'`,
    );
    expect(row.alive).toBe(true);
    await leadership.stop();
  });
});
