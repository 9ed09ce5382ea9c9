/**
 * A worker's pulls keep the queue order exactly (src/scheduler/rules/queue-order.ts): on generated
 * queues with ties in every column (priority, fair key, creation time) over several task classes, one
 * of them the worker may not run, each serial pull (the first the long way, every later one in one
 * round trip, storage/next-work.ts) answers the first PENDING request of the classes the worker may run
 * in PostgreSQL's own order by queueOrderSql, read just before the pull; and every request the worker
 * may run is answered once, the others never. Issue 36 asked whether the one-trip pull can take a head
 * out of order: these serial pulls, the black-box client's pattern, never do; nor does the refill of
 * the slot a worker's completion frees (completeWorkRequest through GraphQL, as the agent reports).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { intArray } from '../../src/storage/db/arrays.js';
import { queueOrderSql } from '../../src/scheduler/rules/queue-order.js';
import { useTestApp } from '../helpers/app.js';
import { CONTENDED, contendedWorkers, resetScheduling, seedScheduling } from '../helpers/scheduler-fixtures.js';

// Automatic scheduling on (a completion refills its slot), but no pass runs by itself: the debounce and the
// interval are an hour, and app.start() is never called.
const t = useTestApp({ scheduler: { automatic: true, passDebounceMs: 3_600_000, passIntervalMs: 3_600_000 } });

/** The worker's classes, and one it may not run (it provides no site:elsewhere). */
const CLASSES = [...CONTENDED.classes, ['worker:type:worker', 'site:elsewhere']];

type Generated = {
  cls: number;
  priorityBase: number;
  priorityAdjustment: number;
  createdAtSeconds: number;
  fairKeySeconds: number;
};
const requestArb: fc.Arbitrary<Generated> = fc.record({
  cls: fc.integer({ min: 0, max: CLASSES.length - 1 }),
  priorityBase: fc.integer({ min: 0, max: 1 }),
  priorityAdjustment: fc.integer({ min: -1, max: 0 }),
  createdAtSeconds: fc.integer({ min: 0, max: 3 }),
  fairKeySeconds: fc.integer({ min: 0, max: 3 }),
});

const COMPLETE = `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename ... on Error { message } } }`;

/** Seeds one idle worker of the contended farm and the generated requests; its id and token, and the requests it may run. */
async function seed(generated: readonly Generated[]) {
  await resetScheduling(t);
  const [worker] = contendedWorkers('order', 1, 1);
  const seeded = await seedScheduling(t, {
    workers: [worker],
    requests: generated.map((r, i) => ({
      key: `r${i}`,
      providedTags: [],
      requiredTags: CLASSES[r.cls],
      priorityBase: r.priorityBase,
      priorityAdjustment: r.priorityAdjustment,
      createdAtSeconds: r.createdAtSeconds,
      fairKeySeconds: r.fairKeySeconds,
    })),
  });
  const mayRun = [...seeded.requestIds.entries()]
    .filter(([key]) => generated[Number(key.slice(1))].cls !== CLASSES.length - 1)
    .map(([, id]) => id);
  return { workerId: seeded.workerIds.get(worker.name)!, token: seeded.tokens.get(worker.name)!, mayRun };
}

/** The first PENDING request among `ids`, in queueOrderSql's order (null when none is left). */
async function firstOf(ids: readonly number[]): Promise<number | null> {
  const [first] = await t.sql<{ id: number }>(
    `select w.id from work_request w where w.status = 'PENDING' and w.id = any(?::int[])
      order by ${queueOrderSql('w')} limit 1`,
    [intArray(ids)],
  );
  return first?.id ?? null;
}

const sorted = (xs: readonly number[]) => [...xs].sort((x, y) => x - y);

describe('the order of serial pulls', () => {
  it('each completion refills the slot with the first request the worker may run, in queueOrderSql order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(requestArb, { minLength: 1, maxLength: 30 }), async (generated) => {
        const { workerId, token, mayRun } = await seed(generated);
        const expected = await firstOf(mayRun);
        const a = await t.app.scheduler.requestWork(workerId);
        expect(a?.workRequestId ?? null).toBe(expected);
        const answered: number[] = [];
        for (let held = expected; held !== null;) {
          answered.push(held);
          const next = await firstOf(mayRun.filter((id) => id !== held));
          const d = await t.gql(COMPLETE, { id: String(held) }, token);
          expect(d.errors).toBeUndefined();
          expect(d.data!.completeWorkRequest.__typename).toBe('WorkRequest');
          const [refilled] = await t.sql<{ id: number }>(
            `select id from work_request where worker_id = ? and status = 'ASSIGNED'`,
            [workerId],
          );
          expect(refilled?.id ?? null).toBe(next);
          held = next;
        }
        expect(sorted(answered)).toEqual(sorted(mayRun));
      }),
      { numRuns: 15 },
    );
  }, 120_000);

  it('each pull answers the first request the worker may run, in queueOrderSql order; each once, the others never', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(requestArb, { minLength: 1, maxLength: 30 }), async (generated) => {
        const { workerId, mayRun } = await seed(generated);
        const answered: number[] = [];
        for (;;) {
          const first = await firstOf(mayRun);
          const a = await t.app.scheduler.requestWork(workerId);
          if (first === null) {
            expect(a).toBeNull();
            break;
          }
          expect(a?.workRequestId).toBe(first);
          answered.push(first);
          // Done, so that the worker's one slot is free for the next pull.
          await t.sql(
            `update work_request set status = 'COMPLETED', result = 'SUCCESS', completed_at = now() where id = ?`,
            [first],
          );
        }
        expect(sorted(answered)).toEqual(sorted(mayRun));
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});
