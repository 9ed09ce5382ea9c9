/**
 * Shared resources have one home (src/scheduler/rules/resources.ts). Pure tables pin freeResources,
 * fitsResources, the shortfall words, reservedStart and mayBackfill; on generated workers and requests
 * of every status, PostgreSQL's freeResourcesSql and fitsResourcesSql equal what freeResources and
 * fitsResources say of the same rows (the active work picked by isActive). The rows are common table
 * expressions named like the tables, with the columns RESOURCE_COLUMNS names (they are not in the
 * schema yet), so the fragments read them unchanged.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isActive, WORK_REQUEST_STATUSES, type WorkRequestStatus } from '../../../src/core/work-request-status.js';
import { isActiveSql } from '../../../src/scheduler/rules/active-work.js';
import {
  describeShortfall,
  fitsResources,
  fitsResourcesSql,
  freeResources,
  freeResourcesSql,
  overCommittedBy,
  overCommittedBySql,
  mayBackfill,
  NO_RESOURCES,
  RESERVATION_DEFAULTS,
  reservationExpired,
  reservedStart,
  RESOURCE_COLUMNS,
  resourceShortfalls,
  type ResourceShortfall,
  type Resources,
  type RunningWork,
} from '../../../src/scheduler/rules/resources.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

const NOW = new Date('2026-06-01T12:00:00.000Z');
const at = (seconds: number) => new Date(NOW.getTime() + seconds * 1000);
const GiB = 1024;
const res = (cpus: number, memoryGib = 0, diskGib = 0): Resources => ({
  cpus,
  memoryMib: memoryGib * GiB,
  diskMib: diskGib * GiB,
});
const running = (reserved: Resources, endsInSeconds: number): RunningWork => ({
  reserved,
  expectedEndAt: at(endsInSeconds),
});

describe('freeResources', () => {
  it.each<[string, Resources, Resources[], Resources]>([
    ['nothing reserved: the whole offer', res(8, 64, 500), [], res(8, 64, 500)],
    ['the offer less the sum of the reservations', res(8, 64, 500), [res(2, 16, 100), res(3, 8, 50)], res(3, 40, 350)],
    ['a reservation of nothing changes nothing', res(8, 64, 500), [NO_RESOURCES], res(8, 64, 500)],
    ['exactly used up: 0', res(4, 8, 10), [res(4, 8, 10)], res(0, 0, 0)],
    [
      'each figure clamped at 0 on its own (CPUs over-committed, memory not)',
      res(4, 32, 100),
      [res(3, 8, 0), res(3, 8, 0)],
      res(0, 16, 100),
    ],
    ['an offer of nothing', NO_RESOURCES, [res(1, 1, 1)], NO_RESOURCES],
  ])('%s', (_name, offered, reserved, free) => {
    expect(freeResources(offered, reserved)).toEqual(free);
  });

  it('NO_RESOURCES is all zeros', () => {
    expect(NO_RESOURCES).toEqual({ cpus: 0, memoryMib: 0, diskMib: 0 });
  });
});

describe('fitsResources', () => {
  it.each<[string, Resources, Resources, boolean]>([
    ['smaller on every figure', res(2, 4, 10), res(4, 8, 20), true],
    ['equal on every figure (a boundary is a fit)', res(4, 8, 20), res(4, 8, 20), true],
    ['one CPU too many', res(5, 4, 10), res(4, 8, 20), false],
    ['one MiB of memory too many', { cpus: 1, memoryMib: 8 * GiB + 1, diskMib: 0 }, res(4, 8, 20), false],
    ['one MiB of disk too many', { cpus: 1, memoryMib: 0, diskMib: 20 * GiB + 1 }, res(4, 8, 20), false],
    ['nothing fits in nothing', NO_RESOURCES, NO_RESOURCES, true],
    ['something does not fit in nothing', res(0, 0, 1), NO_RESOURCES, false],
  ])('%s', (_name, request, free, fits) => {
    expect(fitsResources(request, free)).toBe(fits);
  });
});

describe('shortfalls and their words', () => {
  const offered = res(8, 64, 200);
  const free = res(2, 6, 20);

  it('lists each figure that does not fit, cpus, memory, disk, with what is needed, free and offered', () => {
    expect(resourceShortfalls(res(4, 16, 10), free, offered)).toEqual([
      { resource: 'cpus', needs: 4, free: 2, offered: 8 },
      { resource: 'memory', needs: 16 * GiB, free: 6 * GiB, offered: 64 * GiB },
    ]);
    expect(resourceShortfalls(res(1, 1, 300), free, offered)).toEqual([
      { resource: 'disk', needs: 300 * GiB, free: 20 * GiB, offered: 200 * GiB },
    ]);
    expect(resourceShortfalls(free, free, offered)).toEqual([]);
  });

  it('has no shortfall exactly when the request fits', () => {
    const arb = fc.record({ cpus: fc.nat(6), memoryMib: fc.nat(6), diskMib: fc.nat(6) });
    fc.assert(
      fc.property(arb, arb, (request, available) => {
        expect(resourceShortfalls(request, available, offered).length === 0).toBe(fitsResources(request, available));
      }),
    );
  });

  it.each<[string, ResourceShortfall, string]>([
    ['CPUs', { resource: 'cpus', needs: 4, free: 2, offered: 8 }, 'needs 4 CPUs; build-7 has 2 free of 8'],
    ['one CPU', { resource: 'cpus', needs: 1, free: 0, offered: 8 }, 'needs 1 CPU; build-7 has 0 free of 8'],
    [
      'memory in whole GiB',
      { resource: 'memory', needs: 16 * GiB, free: 6 * GiB, offered: 64 * GiB },
      'needs 16 GiB of memory; build-7 has 6 GiB free of 64',
    ],
    [
      'disk with one decimal',
      { resource: 'disk', needs: 10.5 * GiB, free: 5000, offered: 100 * GiB },
      'needs 10.5 GiB of disk; build-7 has 4.8 GiB free of 100',
    ],
    [
      'a need just above a free figure still reads larger (needs up, free down)',
      { resource: 'memory', needs: 16 * GiB, free: 16 * GiB - 1, offered: 32 * GiB },
      'needs 16 GiB of memory; build-7 has 15.9 GiB free of 32',
    ],
    [
      'one MiB above a tenth rounds the need up',
      { resource: 'memory', needs: 16 * GiB + 1, free: 0, offered: 32 * GiB },
      'needs 16.1 GiB of memory; build-7 has 0 GiB free of 32',
    ],
  ])('%s', (_name, shortfall, words) => {
    expect(describeShortfall('build-7', shortfall)).toBe(words);
  });
});

describe('reservedStart', () => {
  const offered = res(8, 32, 100);
  const cases: { name: string; running: RunningWork[]; request: Resources; start: Date | null }[] = [
    { name: 'fits now: now', running: [running(res(4, 8), 60)], request: res(4, 8), start: NOW },
    { name: 'nothing running: now', running: [], request: offered, start: NOW },
    {
      name: 'the ends taken in order (given out of order): the first after which it fits',
      running: [running(res(4), 30), running(res(2), 10), running(res(2), 60)],
      request: res(4),
      start: at(30),
    },
    {
      name: 'the same running work, a request for all of it: the last end',
      running: [running(res(4), 30), running(res(2), 10), running(res(2), 60)],
      request: res(8),
      start: at(60),
    },
    {
      name: 'a small request: the first end',
      running: [running(res(4), 30), running(res(2), 10), running(res(2), 60)],
      request: res(2),
      start: at(10),
    },
    {
      name: 'a past expected end counts as now',
      running: [running(res(6), -100), running(res(2), 50)],
      request: res(4),
      start: NOW,
    },
    {
      name: 'past work is not enough: the next end',
      running: [running(res(4), -100), running(res(4), 50)],
      request: res(6),
      start: at(50),
    },
    {
      name: 'memory binds while CPUs are free',
      running: [running(res(1, 24), 20), running(res(1, 4), 90)],
      request: res(1, 16),
      start: at(20),
    },
    {
      name: 'over-committed work: free only once what is left running fits in the offer',
      running: [running(res(8), 10), running(res(8), 20)],
      request: res(1),
      start: at(20),
    },
    { name: 'more CPUs than the offer: never', running: [], request: res(9), start: null },
    {
      name: 'more memory than the offer: never, whatever ends',
      running: [running(res(8, 32), 10)],
      request: res(1, 33),
      start: null,
    },
  ];

  it.each(cases)('$name', ({ running: work, request, start }) => {
    expect(reservedStart(offered, work, request, NOW)).toEqual(start);
  });
});

describe('mayBackfill', () => {
  // 16 CPUs; 8 of them free at +600 s, 4 more at +1200 s; 4 free now. The reserved request (12 CPUs) starts at +600 s.
  const offered = res(16, 64, 500);
  const work = [running(res(8, 16), 600), running(res(4, 16), 1200)];
  const reserved12 = { request: res(12, 16), startsAt: at(600) };
  const factor = RESERVATION_DEFAULTS.safetyFactor;

  it('the reservation is what reservedStart gives', () => {
    expect(reservedStart(offered, work, reserved12.request, NOW)).toEqual(reserved12.startsAt);
  });

  const cases: {
    name: string;
    candidate: { reserved: Resources; expectedSeconds: number | null };
    reservation?: { request: Resources; startsAt: Date };
    safetyFactor?: number;
    may: boolean;
  }[] = [
    {
      name: 'ends in time: 300 s × 1.5 = 450 s, before +600 s',
      candidate: { reserved: res(4, 8), expectedSeconds: 300 },
      may: true,
    },
    {
      name: 'ends exactly at the start: 400 s × 1.5 = 600 s',
      candidate: { reserved: res(4, 8), expectedSeconds: 400 },
      may: true,
    },
    {
      name: 'ends 1.5 s after the start: 401 s × 1.5 = 601.5 s',
      candidate: { reserved: res(4, 8), expectedSeconds: 401 },
      may: false,
    },
    {
      name: 'the safety factor decides: 500 s fits unstretched',
      candidate: { reserved: res(4, 8), expectedSeconds: 500 },
      safetyFactor: 1,
      may: true,
    },
    {
      name: 'the safety factor decides: 500 s × 1.5 = 750 s does not',
      candidate: { reserved: res(4, 8), expectedSeconds: 500 },
      may: false,
    },
    {
      name: 'no expected duration, and no room at the start: no',
      candidate: { reserved: res(4, 8), expectedSeconds: null },
      may: false,
    },
    {
      name: 'no expected duration, but room at the start (4 still running + 4 + 8 = 16): yes',
      candidate: { reserved: res(4, 8), expectedSeconds: null },
      reservation: { request: res(8, 16), startsAt: at(600) },
      may: true,
    },
    {
      name: 'room at the start though it runs long (the first way), whatever the factor',
      candidate: { reserved: res(4, 8), expectedSeconds: 100_000 },
      reservation: { request: res(8, 16), startsAt: at(600) },
      may: true,
    },
    {
      name: 'room at the start on CPUs (4 + 4 + 8) but not on memory (16 + 24 + 32 > 64)',
      candidate: { reserved: res(4, 24), expectedSeconds: null },
      reservation: { request: res(8, 32), startsAt: at(600) },
      may: false,
    },
    {
      name: 'work ending exactly at the start has ended: 4 + 0 + 12 = 16 fits',
      candidate: { reserved: res(0, 8), expectedSeconds: null },
      may: true,
    },
    {
      name: 'a millisecond before that end it is still running: 8 + 4 + 0 + 12 > 16',
      candidate: { reserved: res(0, 8), expectedSeconds: null },
      reservation: { request: res(12, 16), startsAt: new Date(at(600).getTime() - 1) },
      may: false,
    },
    {
      name: 'does not fit now (5 CPUs, 4 free), however short',
      candidate: { reserved: res(5, 8), expectedSeconds: 1 },
      may: false,
    },
    {
      name: 'does not fit now, though there would be room at the start',
      candidate: { reserved: res(5, 8), expectedSeconds: null },
      reservation: { request: res(1), startsAt: at(1200) },
      may: false,
    },
  ];

  it.each(cases)('$name', ({ candidate, reservation = reserved12, safetyFactor = factor, may }) => {
    expect(mayBackfill(candidate, reservation, offered, work, NOW, safetyFactor)).toBe(may);
  });

  it('work past its expected end has ended by the start', () => {
    const late = [running(res(12, 16), -30)];
    expect(
      mayBackfill(
        { reserved: res(4), expectedSeconds: null },
        { request: res(12), startsAt: at(60) },
        offered,
        late,
        NOW,
        factor,
      ),
    ).toBe(true);
  });
});

describe('reservation expiry', () => {
  it('the defaults: a safety factor of 1.5, six hours', () => {
    expect(RESERVATION_DEFAULTS).toEqual({ safetyFactor: 1.5, maxSeconds: 21_600 });
  });

  it('lapses once held for maxSeconds, not before', () => {
    const max = RESERVATION_DEFAULTS.maxSeconds;
    expect(reservationExpired(at(-max), NOW, max)).toBe(true);
    expect(reservationExpired(at(-max - 1), NOW, max)).toBe(true);
    expect(reservationExpired(new Date(at(-max).getTime() + 1), NOW, max)).toBe(false);
    expect(reservationExpired(NOW, NOW, max)).toBe(false);
  });
});

// The SQL form.

const { worker: W, workRequest: R, free: F } = RESOURCE_COLUMNS;
const FIGURES = ['cpus', 'memoryMib', 'diskMib'] as const;

interface FarmRequest {
  readonly worker: number | null;
  readonly status: WorkRequestStatus;
  readonly reserved: Resources;
}

/** The worker and work_request tables of `offers` and `requests` as common table expressions, with their parameters. */
function farm(offers: readonly Resources[], requests: readonly FarmRequest[]): { ctes: string; params: unknown[] } {
  const workerRows = offers.map(() => '(?::int, ?::int, ?::int, ?::int)').join(', ');
  const requestRows = requests.length
    ? requests.map(() => '(?::int, ?::int, ?::text, ?::int, ?::int, ?::int)').join(', ')
    : '(null::int, null::int, null::text, null::int, null::int, null::int)';
  const ctes = `with worker(id, ${FIGURES.map((f) => W[f]).join(', ')}) as (values ${workerRows}),
    work_request(id, worker_id, status, ${FIGURES.map((f) => R[f]).join(', ')}) as
      (select * from (values ${requestRows}) v(id, worker_id, status, c, m, d) where v.status is not null)`;
  const params = [
    ...offers.flatMap((o, i) => [i + 1, o.cpus, o.memoryMib, o.diskMib]),
    ...requests.flatMap((r, i) => [
      i + 1,
      r.worker,
      r.status,
      r.reserved.cpus,
      r.reserved.memoryMib,
      r.reserved.diskMib,
    ]),
  ];
  return { ctes, params };
}

/** freeResources and fitsResources of the same rows, in the shape of the queries' answers. */
function expected(offers: readonly Resources[], requests: readonly FarmRequest[]) {
  const free = offers.map((offered, i) =>
    freeResources(
      offered,
      requests.filter((r) => r.worker === i + 1 && isActive(r.status)).map((r) => r.reserved),
    ),
  );
  return {
    free: free.map((f, i) => ({ id: i + 1, ...f })),
    fits: free.flatMap((f, w) =>
      requests.map((r, q) => ({ worker: w + 1, request: q + 1, fits: fitsResources(r.reserved, f) })),
    ),
  };
}

async function fromSql(offers: readonly Resources[], requests: readonly FarmRequest[]) {
  const { ctes, params } = farm(offers, requests);
  const free = await t.sql<Resources & { id: number }>(
    `${ctes}
     select w.id, f.${F.cpus} as cpus, f.${F.memoryMib} as "memoryMib", f.${F.diskMib} as "diskMib"
       from worker w cross join lateral ${freeResourcesSql('w')} f
      order by w.id`,
    params,
  );
  const fits = await t.sql<{ worker: number; request: number; fits: boolean }>(
    `${ctes}
     select w.id as worker, r.id as request, ${fitsResourcesSql('w', 'r')} as fits
       from worker w cross join work_request r
      order by w.id, r.id`,
    params,
  );
  return { free, fits };
}

describe('shared resources in SQL and in TypeScript', () => {
  it('the active work is picked by isActiveSql, not by statuses spelled here', () => {
    expect(freeResourcesSql('w')).toContain(isActiveSql('held'));
  });

  it('a worker with work of every status: only the active work counts, a figure clamps at 0, a boundary fits', async () => {
    const offers = [res(8, 16, 100), res(2, 64, 100), NO_RESOURCES];
    const on = (worker: number | null, status: WorkRequestStatus, reserved: Resources): FarmRequest => ({
      worker,
      status,
      reserved,
    });
    const requests = [
      ...WORK_REQUEST_STATUSES.map((s) => on(1, s, res(3, 4, 10))),
      on(2, 'RUNNING', res(2, 8)),
      on(2, 'ASSIGNED', res(1, 8)),
      on(null, 'PENDING', res(2, 8, 80)),
      on(null, 'PENDING', NO_RESOURCES),
    ];
    const answers = await fromSql(offers, requests);
    expect(answers.free).toEqual([
      { id: 1, ...res(2, 8, 80) },
      { id: 2, ...res(0, 48, 100) },
      { id: 3, ...NO_RESOURCES },
    ]);
    expect(answers).toEqual(expected(offers, requests));
    const fitsOn = (worker: number, request: number) =>
      answers.fits.find((a) => a.worker === worker && a.request === request)?.fits;
    // The first pending request on worker 1: 2 of 2 CPUs, 8 of 8 GiB, 80 of 80 GiB.
    expect(fitsOn(1, requests.length - 1)).toBe(true);
    expect(fitsOn(2, requests.length - 1)).toBe(false);
    expect(fitsOn(3, requests.length)).toBe(true);
  });

  const figureArb = (small: number[], max: number) => fc.oneof(fc.constantFrom(...small), fc.integer({ min: 0, max }));
  const offerArb = fc.record({
    cpus: fc.integer({ min: 0, max: 8 }),
    memoryMib: figureArb([0, 4 * GiB, 8 * GiB], 8 * GiB),
    diskMib: figureArb([0, 10 * GiB], 10 * GiB),
  });
  const reservedArb = fc.record({
    cpus: fc.integer({ min: 0, max: 4 }),
    memoryMib: figureArb([0, GiB, 2 * GiB, 4 * GiB], 4 * GiB),
    diskMib: figureArb([0, 5 * GiB, 10 * GiB], 10 * GiB),
  });
  const farmArb = fc.array(offerArb, { minLength: 1, maxLength: 6 }).chain((offers) =>
    fc.record({
      offers: fc.constant(offers),
      requests: fc.array(
        fc.record({
          worker: fc.option(fc.integer({ min: 1, max: offers.length }), { nil: null }),
          status: fc.constantFrom(...WORK_REQUEST_STATUSES),
          reserved: reservedArb,
        }),
        { maxLength: 20 },
      ),
    }),
  );

  it('freeResourcesSql and fitsResourcesSql agree with freeResources and fitsResources', async () => {
    await fc.assert(
      fc.asyncProperty(farmArb, async ({ offers, requests }) => {
        expect(await fromSql(offers, requests)).toEqual(expected(offers, requests));
      }),
      { numRuns: 60 },
    );
  });

  it('overCommittedBySql agrees with overCommittedBy: a batch of the active work, its other work before it', async () => {
    await fc.assert(
      fc.asyncProperty(
        farmArb,
        fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
        async ({ offers, requests }, inBatch) => {
          const batch = requests.flatMap((r, i) =>
            inBatch[i] && r.worker !== null && isActive(r.status) ? [i + 1] : [],
          );
          const { ctes, params } = farm(offers, requests);
          const answered = await t.sql<{ id: number; over: boolean }>(
            `${ctes} select w.id, ${overCommittedBySql('w')} as over from worker w order by w.id`,
            [...params, `{${batch.join(',')}}`],
          );
          const want = offers.map((offered, i) => {
            const active = requests.flatMap((r, q) =>
              r.worker === i + 1 && isActive(r.status) ? [{ r, id: q + 1 }] : [],
            );
            const before = active.filter((a) => !batch.includes(a.id)).map((a) => a.r.reserved);
            const added = active.filter((a) => batch.includes(a.id)).map((a) => a.r.reserved);
            return { id: i + 1, over: overCommittedBy(offered, before, added) };
          });
          expect(answered).toEqual(want);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('overCommittedBy: a batch over-commits a figure only when it reserves some of it', () => {
    // Already over the offer by work before the batch: a batch reserving none of that figure adds nothing.
    expect(overCommittedBy(res(2, 8), [res(3, 1)], [res(0, 1)])).toBe(false);
    expect(overCommittedBy(res(2, 8), [res(3, 1)], [res(1, 1)])).toBe(true);
    expect(overCommittedBy(res(4, 8), [res(2, 4)], [res(1, 2), res(1, 2)])).toBe(false);
    expect(overCommittedBy(res(4, 8), [res(2, 4)], [res(1, 2), res(1, 3)])).toBe(true);
  });
});
