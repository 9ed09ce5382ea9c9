/** Cost (rules/pool-cost.ts), table-tested: by the second and by started period, the month split, a request's share, the launch price. */
import { describe, expect, it } from 'vitest';
import {
  costInMonth,
  instanceCost,
  launchPrice,
  monthStartUtc,
  workRequestCost,
} from '../../../src/scheduler/rules/pool-cost.js';
import { billedSeconds, paidPeriodLeft } from '../../../src/scheduler/rules/scale-in.js';

const T0 = new Date('2026-11-10T10:00:00Z');
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

describe('billedSeconds', () => {
  it.each([
    ['by the second', 0, null, 0],
    ['by the second', 90.5, null, 90.5],
    ['by the second, negative is 0', -5, null, 0],
    ['by hour: nothing run, nothing billed', 0, 3600, 0],
    ['by hour: a second starts the first hour', 1, 3600, 3600],
    ['by hour: exactly an hour is one hour', 3600, 3600, 3600],
    ['by hour: an hour and a second are two', 3601, 3600, 7200],
  ])('%s: %s s with period %s → %s', (_name, seconds, period, expected) => {
    expect(billedSeconds(seconds, period)).toBe(expected);
  });

  it('between period starts, billed is the age plus the paid period left (scale-in.ts)', () => {
    for (const age of [1, 1799, 3599, 3601, 9000])
      expect(billedSeconds(age, 3600)).toBe(age + paidPeriodLeft(T0, 3600, at(age)));
  });
});

describe('instanceCost', () => {
  it.each([
    ['by the second: half an hour at 0.2', 0.2, 1800, null, 0.1],
    ['by the hour: half an hour at 0.2 costs an hour', 0.2, 1800, 3600, 0.2],
    ['by the hour: 61 minutes cost two hours', 0.5, 3660, 3600, 1],
    ['by the second: 61 minutes', 0.5, 3660, null, 0.5 * (3660 / 3600)],
    ['free', 0, 7200, 3600, 0],
  ])('%s', (_name, price, seconds, period, expected) => {
    expect(instanceCost(price, T0, at(seconds), period)).toBeCloseTo(expected, 10);
  });

  it('no price, no cost', () => {
    expect(instanceCost(null, T0, at(3600), null)).toBeNull();
  });
});

describe('costInMonth', () => {
  const month = new Date('2026-12-01T00:00:00Z');
  const before = (s: number) => new Date(month.getTime() - s * 1000);
  const after = (s: number) => new Date(month.getTime() + s * 1000);
  it.each([
    ['ended before the month', before(7200), before(3600), null, 0],
    ['by the second: split at the month start', before(1800), after(1800), null, 0.5],
    ['all in the month', after(0), after(3600), null, 1],
    // Requested 30 min before the month, run 90 min, by hour: hour 1 started last month, hour 2 (at +30 min) in this one.
    ['by hour: a period counts in the month it started in', before(1800), after(3600), 3600, 1],
    // Requested 30 min before, run 20 min into the month: its only hour started last month.
    ['by hour: nothing started in the month', before(1800), after(1200), 3600, 0],
    ['by hour: started in the month', after(10), after(4000), 3600, 2],
  ])('%s', (_name, requested, end, period, expected) => {
    expect(costInMonth(1, requested, end, month, period)).toBeCloseTo(expected, 10);
  });

  it('last month and this month add up to the whole cost', () => {
    const requested = before(5000);
    const end = after(9000);
    for (const period of [null, 3600, 600]) {
      const last =
        costInMonth(0.3, requested, end, new Date('2026-11-01T00:00:00Z'), period) -
        costInMonth(0.3, requested, end, month, period);
      expect(last + costInMonth(0.3, requested, end, month, period)).toBeCloseTo(
        instanceCost(0.3, requested, end, period)!,
        10,
      );
    }
  });

  it('no price: 0', () => {
    expect(costInMonth(null, before(10), after(10), month, null)).toBe(0);
  });
});

describe('monthStartUtc', () => {
  it('is the first of the UTC month, whatever the time', () => {
    expect(monthStartUtc(new Date('2026-12-01T00:00:00Z')).toISOString()).toBe('2026-12-01T00:00:00.000Z');
    expect(monthStartUtc(new Date('2026-11-30T23:59:59Z')).toISOString()).toBe('2026-11-01T00:00:00.000Z');
  });
});

describe('workRequestCost', () => {
  it.each([
    ['an hour at 0.4, alone on its worker', 0.4, 3600, 1, 0.4],
    ['an hour at 0.4, a worker of concurrency 4', 0.4, 3600, 4, 0.1],
    ['half an hour at 1, concurrency 2', 1, 1800, 2, 0.25],
  ])('%s', (_name, price, seconds, concurrency, expected) => {
    expect(workRequestCost(price, T0, at(seconds), concurrency)).toBeCloseTo(expected, 10);
  });

  it('null without a price or before it started', () => {
    expect(workRequestCost(null, T0, at(60), 1)).toBeNull();
    expect(workRequestCost(1, null, at(60), 1)).toBeNull();
  });
});

describe('launchPrice', () => {
  it.each([
    ["the offering's price wins", { market: 'on-demand', maxPricePerHour: null, pricePerHour: 0.1 }, 0.5, 0.1],
    ['spot without a price: its maximum (an upper bound)', { market: 'spot', maxPricePerHour: 0.05 }, 0.5, 0.05],
    ['spot with a price: its price', { market: 'spot', maxPricePerHour: 0.05, pricePerHour: 0.02 }, 0.5, 0.02],
    ["on-demand without a price: the pool's", { market: 'on-demand', maxPricePerHour: null }, 0.5, 0.5],
    ['no offering: the pool\u2019s', null, 0.5, 0.5],
    ['nothing known', { market: 'spot', maxPricePerHour: null }, null, null],
  ])('%s', (_name, offering, poolPrice, expected) => {
    expect(launchPrice(offering, poolPrice)).toBe(expected);
  });

  it('a provider price out of range is not taken', () => {
    expect(launchPrice(null, 0.5, 5e-324)).toBe(0.5);
    expect(launchPrice(null, 0.5, 1e7)).toBe(0.5);
    expect(launchPrice(null, 0.5, 0)).toBe(0);
  });

  it.each([
    [
      "the offering's own price wins over the provider's",
      { market: 'on-demand', maxPricePerHour: null, pricePerHour: 0.1 },
      0.5,
      0.1,
    ],
    ["the provider's price wins over the pool's", { market: 'on-demand', maxPricePerHour: null }, 0.5, 0.0119],
    ["the provider's price wins over a spot maximum", { market: 'spot', maxPricePerHour: 0.05 }, 0.5, 0.0119],
    ["no offering: the provider's", null, 0.5, 0.0119],
  ])('with a provider price of 0.0119: %s', (_name, offering, poolPrice, expected) => {
    expect(launchPrice(offering, poolPrice, 0.0119)).toBe(expected);
  });
});
