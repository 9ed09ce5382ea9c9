/**
 * Atomic assignment under real concurrency (docs/design.md: scheduler): two server processes on one database, 100
 * workers of concurrency 2 pulling at once through both, over 1,000 pending requests. A request is
 * assigned at most once, a worker never holds more than its concurrency, nothing is lost, and in the
 * end every request ran exactly once. Scheduling passes of both processes join one of the rounds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/server/app.js';
import { createLogger } from '../../src/core/log.js';
import { secondAppConfig, useTestApp } from '../helpers/app.js';
import {
  classifyPending,
  CONTENDED,
  contendedWorkers,
  insertPending,
  resetScheduling,
  seedScheduling,
  type RequestRow,
  type WorkerRow,
} from '../helpers/scheduler-fixtures.js';

const WORKERS = 100;
const CONCURRENCY = 2;
const REQUESTS = 1000;

const t = useTestApp();
let other: App;

beforeAll(async () => {
  // A second process: its own ORM, connection pool, class cache and scheduler, on the same database.
  other = await buildApp(secondAppConfig(t, { scheduler: { automatic: false } }), {
    log: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'),
  });
});

afterAll(async () => {
  await other?.stop();
});

async function gql(
  app: App,
  query: string,
  variables: Record<string, unknown>,
  token: string,
): Promise<Record<string, any>> {
  const res = await app.yoga.fetch('http://test/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: Record<string, any>; errors?: unknown[] };
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data!;
}

const REQUEST_WORK = `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;
const COMPLETE = `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename ... on Error { code message } } }`;

const CLASSES = CONTENDED.classes;
const workers: WorkerRow[] = contendedWorkers('race', WORKERS, CONCURRENCY);
const requests: RequestRow[] = Array.from({ length: REQUESTS }, (_, i) => ({
  key: `job-${i}`,
  providedTags: [`task:source-package:p${i % 37}`],
  requiredTags: CLASSES[i % CLASSES.length],
  priorityBase: (i * 7) % 5,
  priorityAdjustment: 0,
  createdAtSeconds: (i * 13) % 50, // many ties: the id decides among them
}));

describe('two processes, 100 workers pulling at once', () => {
  it('assigns each request at most once and never beyond a worker concurrency; in the end each ran exactly once', async () => {
    await resetScheduling(t);
    const seeded = await seedScheduling(t, { workers, requests });
    const apps = [t.app, other];
    const nameOf = new Map([...seeded.workerIds].map(([name, id]) => [id, name]));
    /** Every assignment ever handed out: request id → worker name. A second one for the same request fails the test. */
    const given = new Map<number, string>();
    const record = (id: number, worker: string) => {
      expect(given.get(id), `request ${id} assigned twice`).toBeUndefined();
      given.set(id, worker);
    };

    /** One round: each worker asks twice at once, once through each process; optionally both processes run a pass meanwhile. */
    async function round(withPasses: boolean): Promise<number> {
      // The passes start with the pulls: they lock the worker rows they fill, and pulls for those workers
      // wait for the pass to commit, then find them full.
      const passes = withPasses
        ? apps.map(async (app) =>
            (await app.scheduler.runPass()).map((a) => ({ id: a.workRequestId, worker: nameOf.get(a.workerId)! })),
          )
        : [];
      const calls = workers.flatMap((w, i) =>
        [0, 1].map(async (k) => {
          const data = await gql(apps[(i + k) % 2], REQUEST_WORK, {}, seeded.tokens.get(w.name)!);
          expect(data.requestWork.__typename).toBe('RequestWorkPayload');
          const id = data.requestWork.workRequest?.id;
          return id ? [{ id: Number(id), worker: w.name }] : [];
        }),
      );
      const got = (await Promise.all([...passes, ...calls])).flat();
      for (const g of got) record(g.id, g.worker);
      await checkInvariants();
      return got.length;
    }

    async function checkInvariants(): Promise<void> {
      const perWorker = await t.sql<{ name: string; n: number }>(
        `select w.name, count(*)::int as n from work_request r join worker w on w.id = r.worker_id where r.status in ('ASSIGNED', 'RUNNING') group by w.name`,
      );
      for (const row of perWorker) expect(row.n, `${row.name} holds ${row.n}`).toBeLessThanOrEqual(CONCURRENCY);
      const [totals] = await t.sql<{ total: number; distinct_ids: number; unowned: number }>(
        `select count(*)::int as total, count(distinct id)::int as distinct_ids,
                count(*) filter (where status <> 'PENDING' and worker_id is null)::int as unowned from work_request`,
      );
      expect(totals).toEqual({ total: REQUESTS, distinct_ids: REQUESTS, unowned: 0 });
      // What the table says agrees with what the callers were told.
      const held = await t.sql<{ id: number; name: string }>(
        `select r.id, w.name from work_request r join worker w on w.id = r.worker_id`,
      );
      expect(new Map(held.map((h) => [h.id, h.name]))).toEqual(given);
    }

    async function fillUp(withPassesFirst: boolean): Promise<number[]> {
      const counts = [await round(withPassesFirst)];
      while (counts[counts.length - 1] > 0) counts.push(await round(false));
      return counts;
    }

    const byStatus = async () =>
      Object.fromEntries(
        (
          await t.sql<{ status: string; n: number }>(
            `select status, count(*)::int as n from work_request group by status`,
          )
        ).map((r) => [r.status, r.n]),
      );
    const sum = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
    const nonZero = (o: Record<string, number>) => Object.fromEntries(Object.entries(o).filter(([, n]) => n > 0));

    /** Completes what the workers hold (all of it, or one request each), through both processes at once. */
    async function completeHeld(onePerWorker: boolean): Promise<void> {
      const held = await t.sql<{ id: number; name: string }>(
        `select ${onePerWorker ? 'distinct on (w.name)' : ''} r.id, w.name from work_request r join worker w on w.id = r.worker_id
          where r.status = 'ASSIGNED' order by w.name, r.id`,
      );
      await Promise.all(
        held.map(async (h, i) => {
          const data = await gql(apps[i % 2], COMPLETE, { id: String(h.id) }, seeded.tokens.get(h.name)!);
          expect(data.completeWorkRequest.__typename).toBe('WorkRequest');
        }),
      );
    }

    /** Fills the free slots, and checks that exactly as many requests were assigned as there were free slots and pending requests. */
    async function fillAndCheck(freeSlots: number, withPasses: boolean): Promise<void> {
      const pendingBefore = REQUESTS - given.size;
      const [done] = await t.sql<{ n: number }>(
        `select count(*)::int as n from work_request where status = 'COMPLETED'`,
      );
      const assigned = sum(await fillUp(withPasses));
      expect(assigned).toBe(Math.min(freeSlots, pendingBefore));
      expect(await byStatus()).toEqual(
        nonZero({ COMPLETED: done.n, ASSIGNED: given.size - done.n, PENDING: REQUESTS - given.size }),
      );
    }

    // First: nothing completes, so the workers end full: 200 assigned, 800 still pending.
    await fillAndCheck(WORKERS * CONCURRENCY, false);
    expect(await byStatus()).toEqual({ ASSIGNED: WORKERS * CONCURRENCY, PENDING: REQUESTS - WORKERS * CONCURRENCY });

    // Each worker finishes one of its two: its two calls at once must get it exactly one more (the worker row lock).
    await completeHeld(true);
    await fillAndCheck(WORKERS, false);
    const perWorker = await t.sql<{ n: number }>(
      `select count(*)::int as n from work_request where status = 'ASSIGNED' group by worker_id`,
    );
    expect(perWorker.map((r) => r.n)).toEqual(Array(WORKERS).fill(CONCURRENCY));

    // Then: complete everything held and fill up again, until all ran. In the first of these cycles,
    // both processes also run a full pass while the workers pull.
    for (let cycle = 0; (await byStatus()).COMPLETED !== REQUESTS; cycle++) {
      expect(cycle, 'cycles needed to run everything').toBeLessThan(REQUESTS / (WORKERS * CONCURRENCY) + 1);
      await completeHeld(false);
      await fillAndCheck(WORKERS * CONCURRENCY, cycle === 0);
    }
    expect(await byStatus()).toEqual({ COMPLETED: REQUESTS });
    expect(given.size).toBe(REQUESTS);
  }, 240_000); // about 25 s on an idle 2-core machine; several times that when it is shared
});

describe('task classes created by concurrent submissions', () => {
  it('a class committed after a newer one is still found by a process that saw the newer one first', async () => {
    await resetScheduling(t);
    const runner = (name: string, tag: string): WorkerRow => ({
      ...workers[0],
      name,
      providedTags: ['worker:type:worker', tag],
    });
    const job = (key: string, tag: string): RequestRow => ({
      ...requests[0],
      key,
      providedTags: [],
      requiredTags: ['worker:type:worker', tag],
    });
    const seeded = await seedScheduling(t, {
      workers: [runner('slow-runner', 'gap:slow'), runner('fast-runner', 'gap:fast')],
      requests: [],
    });
    const pull = async (name: string): Promise<string | null> =>
      (await gql(other, REQUEST_WORK, {}, seeded.tokens.get(name)!)).requestWork.workRequest?.id ?? null;

    // A submission creates a new task class and is slow to commit...
    const slow = t.app.orm.em.fork();
    await slow.begin();
    const slowId = (await insertPending(t, slow, [job('slow', 'gap:slow')])).get('slow');
    await classifyPending(slow);
    // ...while another creates a newer class and commits (or waits for its turn).
    const fast = t.app.orm.em.fork().transactional(async (tx) => {
      const ids = await insertPending(t, tx, [job('fast', 'gap:fast')]);
      await classifyPending(tx);
      return ids.get('fast');
    });
    await Promise.race([fast, new Promise((resolve) => setTimeout(resolve, 300))]);
    // The other process serves a pull meanwhile, which loads every class committed so far into its cache.
    const early = await pull('fast-runner');
    await slow.commit();
    const fastId = await fast;
    expect(await pull('slow-runner')).toBe(String(slowId));
    expect(early ?? (await pull('fast-runner'))).toBe(String(fastId));
  });
});
