/**
 * The month's cost in SQL (rules/pool-cost.ts: costInMonthSql, summed by storage/pool-runtime.ts) agrees
 * with its TypeScript form (costInMonth) on PostgreSQL, and so does the committed cost the budget limits
 * (committedCostInMonthSql, committedCostInMonth): random prices, billing periods, requests, ends
 * and month starts, at millisecond precision, every price in the range the input accepts (services/pools).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  committedCostInMonth,
  committedCostInMonthSql,
  costInMonth,
  costInMonthSql,
  firstCharge,
  instanceCost,
  MAX_PRICE_PER_HOUR,
  MIN_PRICE_PER_HOUR,
} from '../../src/scheduler/rules/pool-cost.js';

const t = useTestApp();

const MONTH = Date.parse('2026-11-01T00:00:00Z');
const DAY = 86_400_000;

describe('costInMonthSql', () => {
  it('agrees with costInMonth', async () => {
    const cases = fc.sample(
      fc.record({
        price: fc.oneof(
          fc.constant(null),
          fc.constant(0),
          fc.double({ min: MIN_PRICE_PER_HOUR, max: MAX_PRICE_PER_HOUR, noNaN: true }),
        ),
        period: fc.oneof(
          fc.constant(null),
          fc.constantFrom(60, 600, 3600, 86_400),
          fc.integer({ min: 60, max: 31 * 86_400 }),
        ),
        requested: fc.integer({ min: MONTH - 40 * DAY, max: MONTH + 20 * DAY }),
        length: fc.oneof(fc.integer({ min: 0, max: 3_600_000 }), fc.integer({ min: 0, max: 60 * DAY })),
      }),
      { numRuns: 300, seed: 20261128 },
    );
    const sql = `select ${costInMonthSql('i', 'p', 'v.end_at', 'v.month_start')}::float as cost
                   from (select ?::timestamptz as end_at, ?::timestamptz as month_start) v,
                        (select ?::float as price_per_hour, ?::timestamptz as requested_at) i,
                        (select null::float as price_per_hour, ?::int as billing_period_seconds) p`;
    for (const c of cases) {
      const requested = new Date(c.requested);
      const end = new Date(c.requested + c.length);
      const month = new Date(MONTH);
      const [row] = await t.sql<{ cost: number }>(sql, [
        end.toISOString(),
        month.toISOString(),
        c.price,
        requested.toISOString(),
        c.period,
      ]);
      const expected = costInMonth(c.price, requested, end, month, c.period);
      // Relative to what the instance cost in all: floating point, not a rule, may differ.
      const scale = Math.max(1, instanceCost(c.price, requested, end, c.period) ?? 0);
      expect(Math.abs(row!.cost - expected) / scale, JSON.stringify(c)).toBeLessThan(1e-9);
    }
  });
});

describe('committedCostInMonthSql', () => {
  it('agrees with committedCostInMonth: a live instance launched this month counts at least its first charge, an ended one what it cost', async () => {
    const cases = fc.sample(
      fc.record({
        price: fc.oneof(
          fc.constant(null),
          fc.constant(0),
          fc.double({ min: MIN_PRICE_PER_HOUR, max: MAX_PRICE_PER_HOUR, noNaN: true }),
        ),
        period: fc.oneof(fc.constant(null), fc.constantFrom(60, 3600), fc.integer({ min: 60, max: 31 * 86_400 })),
        requested: fc.integer({ min: MONTH - 2 * DAY, max: MONTH + 20 * DAY }),
        length: fc.oneof(fc.integer({ min: 0, max: 7_200_000 }), fc.integer({ min: 0, max: 10 * DAY })),
        live: fc.boolean(),
      }),
      { numRuns: 300, seed: 20261130 },
    );
    const sql = `select ${committedCostInMonthSql('i', 'p', 'v.end_at', 'v.month_start')}::float as cost
                   from (select ?::timestamptz as end_at, ?::timestamptz as month_start) v,
                        (select ?::float as price_per_hour, ?::timestamptz as requested_at, ?::timestamptz as terminated_at) i,
                        (select null::float as price_per_hour, ?::int as billing_period_seconds) p`;
    for (const c of cases) {
      const requested = new Date(c.requested);
      const end = new Date(c.requested + c.length);
      const month = new Date(MONTH);
      const [row] = await t.sql<{ cost: number }>(sql, [
        end.toISOString(),
        month.toISOString(),
        c.price,
        requested.toISOString(),
        c.live ? null : end.toISOString(),
        c.period,
      ]);
      const expected = committedCostInMonth(c.price, requested, end, month, c.period, c.live);
      const scale = Math.max(1, instanceCost(c.price, requested, end, c.period) ?? 0, firstCharge(c.price, c.period));
      expect(Math.abs(row!.cost - expected) / scale, JSON.stringify(c)).toBeLessThan(1e-9);
    }
  });

  it('a launch just recorded at 1,000/h commits 1,000 by the second and a period\u2019s price when billed by period; ended, only what it ran', () => {
    const month = new Date(MONTH);
    const at = new Date(MONTH + DAY);
    expect(committedCostInMonth(1000, at, at, month, null, true)).toBe(1000);
    expect(committedCostInMonth(1000, at, at, month, 600, true)).toBeCloseTo(1000 / 6, 9);
    expect(committedCostInMonth(1000, at, new Date(at.getTime() + 3600), month, null, false)).toBeCloseTo(1, 9);
    // Launched last month: only its part in this one.
    expect(committedCostInMonth(1000, new Date(MONTH - 1000), new Date(MONTH + 1000), month, null, true)).toBeCloseTo(
      1000 / 3600,
      9,
    );
    expect(committedCostInMonth(null, at, at, month, null, true)).toBe(0);
  });
});
