/**
 * Placement preference has one home (src/scheduler/rules/placement-preference.ts). On generated free
 * workers, PostgreSQL's order by staticFirstSql is the TypeScript order staticFirst, and both agree
 * with workerPreference wherever its first rule (static before pool) decides; staticBeforePool keeps
 * each kind in the order given.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decidingRule,
  PLACEMENT_RULES,
  staticBeforePool,
  staticFirst,
  staticFirstSql,
  workerPreference,
  placementFigures,
} from '../../../src/scheduler/rules/placement-preference.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

const workerArb = fc.record({
  pooled: fc.boolean(),
  cpus: fc.integer({ min: 0, max: 4 }),
  speed: fc.integer({ min: 0, max: 3 }),
  eligible: fc.integer({ min: 1, max: 3 }),
});

describe('placement preference in SQL and in TypeScript', () => {
  it('order by staticFirstSql is staticFirst; static before pool decides first for either kind of work', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(workerArb, { minLength: 1, maxLength: 20 }), async (generated) => {
        const workers = generated.map((w, i) => ({
          ...w,
          id: (i * 7919) % 1009,
          size: [w.cpus, 0] as [number, number],
          speed: w.speed * 1000,
        }));
        const rows = await t.sql<{ id: number }>(
          `select w.id from (values ${workers.map(() => '(?::int, ?::int)').join(', ')}) as w(id, pool_id) order by ${staticFirstSql('w')}`,
          workers.flatMap((w) => [w.id, w.pooled ? 1 : null]),
        );
        expect(rows.map((r) => r.id)).toEqual([...workers].sort(staticFirst).map((w) => w.id));
        for (const heavy of [false, true]) {
          const preferred = [...workers].sort(workerPreference(heavy));
          expect(preferred.map((w) => w.pooled)).toEqual([...workers].sort(staticFirst).map((w) => w.pooled));
          for (const [a, b] of workers.flatMap((a) => workers.map((b) => [a, b] as const))) {
            if (a.pooled !== b.pooled) expect(decidingRule(heavy, a, b)).toBe(PLACEMENT_RULES.STATIC_BEFORE_POOL);
          }
        }
      }),
      { numRuns: 40 },
    );
  });

  it('heavy work goes to the fastest host first, then the largest; other work to the smallest, whatever its speed', () => {
    const host = (id: number, speed: number, cpus: number) => ({
      id,
      pooled: false,
      eligible: 1,
      speed,
      size: [cpus, 8] as const,
    });
    const slowBig = host(1, 2000, 64);
    const fastSmall = host(2, 9000, 8);
    const unmeasured = host(3, 0, 128);
    const fastBig = host(4, 9000, 16);
    const all = [slowBig, fastSmall, unmeasured, fastBig];
    expect([...all].sort(workerPreference(true)).map((w) => w.id)).toEqual([4, 2, 1, 3]);
    expect(decidingRule(true, fastSmall, slowBig)).toBe(PLACEMENT_RULES.FASTEST_FOR_HEAVY);
    expect(decidingRule(true, fastBig, fastSmall)).toBe(PLACEMENT_RULES.LARGEST_FOR_HEAVY);
    expect([...all].sort(workerPreference(false)).map((w) => w.id)).toEqual([2, 4, 1, 3]);
    expect(decidingRule(false, fastSmall, slowBig)).toBe(PLACEMENT_RULES.SMALLEST_FOR_LIGHT);
    expect(placementFigures(['worker:cpu-count=8', 'worker:memory-gib=31', 'worker:cpu-speed-all=4200'])).toEqual({
      size: [8, 31],
      speed: 4200,
    });
    expect(placementFigures(['worker:cpu-speed=900'])).toEqual({ size: [0, 0], speed: 0 });
  });

  it('staticBeforePool is a stable partition', () => {
    const list = [
      { name: 'a', poolId: 1 },
      { name: 'b', poolId: null },
      { name: 'c', poolId: 2 },
      { name: 'd', poolId: null },
    ];
    expect(staticBeforePool(list).map((w) => w.name)).toEqual(['b', 'd', 'a', 'c']);
  });
});
