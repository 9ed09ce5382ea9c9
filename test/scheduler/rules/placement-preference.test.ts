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
} from '../../../src/scheduler/rules/placement-preference.js';
import { useTestApp } from '../../helpers/app.js';

const t = useTestApp();

const workerArb = fc.record({
  pooled: fc.boolean(),
  cpus: fc.integer({ min: 0, max: 4 }),
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
