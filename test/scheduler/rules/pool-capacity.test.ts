/** A pool's room to launch (rules/pool-capacity.ts), table-tested: the one rule demand and the diagnosis share. */
import { describe, expect, it } from 'vitest';
import {
  costBudgetRoom,
  LAUNCH_LIMITS,
  launchRoom,
  underCostBudget,
} from '../../../src/scheduler/rules/pool-capacity.js';

const NOW = new Date('2026-11-26T12:00:00Z');
const pool = (o: Partial<Parameters<typeof launchRoom>[0]> = {}) => ({
  maxActiveInstances: 3,
  monthlyRuntimeBudgetSeconds: null,
  launchFailures: 0,
  launchRetryAt: null,
  lastErrorKind: null,
  ...o,
});

describe('launchRoom', () => {
  it.each([
    ['room left', pool(), 1, 0, { room: 2, launchable: 2, atLimit: [] }],
    ['at its maximum', pool(), 3, 0, { room: 0, launchable: 0, atLimit: [LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES] }],
    [
      'more than its maximum (the maximum was lowered)',
      pool(),
      5,
      0,
      { room: 0, launchable: 0, atLimit: [LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES] },
    ],
    [
      'budget used up',
      pool({ monthlyRuntimeBudgetSeconds: 3600 }),
      0,
      3600,
      { room: 3, launchable: 0, atLimit: [LAUNCH_LIMITS.MONTHLY_BUDGET] },
    ],
    [
      'budget not yet used up',
      pool({ monthlyRuntimeBudgetSeconds: 3600 }),
      0,
      3599,
      { room: 3, launchable: 3, atLimit: [] },
    ],
    [
      'backing off after a failed launch',
      pool({ launchFailures: 1, launchRetryAt: new Date(NOW.getTime() + 60_000), lastErrorKind: 'capacity' }),
      0,
      0,
      { room: 3, launchable: 0, atLimit: [LAUNCH_LIMITS.BACKOFF] },
    ],
    [
      'the backoff over',
      pool({ launchFailures: 1, launchRetryAt: new Date(NOW.getTime() - 1), lastErrorKind: 'capacity' }),
      0,
      0,
      { room: 3, launchable: 3, atLimit: [] },
    ],
    [
      'every limit at once, in demand order',
      pool({ monthlyRuntimeBudgetSeconds: 10, launchFailures: 2, launchRetryAt: new Date(NOW.getTime() + 1000) }),
      3,
      20,
      {
        room: 0,
        launchable: 0,
        atLimit: [LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES, LAUNCH_LIMITS.MONTHLY_BUDGET, LAUNCH_LIMITS.BACKOFF],
      },
    ],
  ])('%s', (_name, p, instances, runtime, expected) => {
    expect(launchRoom(p, instances, runtime, NOW, 5)).toMatchObject(expected);
  });

  it.each([
    ['cost budget used up', 10, 10, { launchable: 0, overCostBudget: true, atLimit: [LAUNCH_LIMITS.COST_BUDGET] }],
    ['cost budget over', 10, 12.5, { launchable: 0, overCostBudget: true, atLimit: [LAUNCH_LIMITS.COST_BUDGET] }],
    ['cost budget not yet used up', 10, 9.99, { launchable: 3, overCostBudget: false, atLimit: [] }],
    [
      'a budget of 0 launches nothing',
      0,
      0,
      { launchable: 0, overCostBudget: true, atLimit: [LAUNCH_LIMITS.COST_BUDGET] },
    ],
    ['no cost budget', null, 1e9, { launchable: 3, overCostBudget: false, atLimit: [] }],
  ])('%s', (_name, monthlyCostBudget, cost, expected) => {
    expect(launchRoom(pool({ monthlyCostBudget }), 0, 0, NOW, 5, 0, cost)).toMatchObject(expected);
  });

  it.each([
    ['no budget', null, 0, 1000, Infinity],
    ['no price', 1, 0, 0, Infinity],
    ['1,000 an hour against 1: one launch, made while below it', 1, 0, 1000, 1],
    ['reached', 1, 1, 1000, 0],
    ['room for exactly two', 2000, 0, 1000, 2],
    ['room for two and a part: the third is made while still below', 2500, 0, 1000, 3],
    ['a budget of 0', 0, 0, 1000, 0],
  ])('costBudgetRoom: %s', (_name, budget, committed, charge, room) => {
    expect(costBudgetRoom(budget, committed, charge)).toBe(room);
    expect(underCostBudget(budget, committed)).toBe(room > 0);
  });

  it('a pool priced 1,000/h with a budget of 1 may launch one now, and none once that one is recorded', () => {
    const dear = pool({ monthlyCostBudget: 1, pricePerHour: 1000, specifications: {} });
    expect(launchRoom(dear, 0, 0, NOW, 5, 0, 0)).toMatchObject({ room: 3, budgetRoom: 1, launchable: 1, atLimit: [] });
    expect(launchRoom(dear, 1, 0, NOW, 5, 0, 1000)).toMatchObject({
      budgetRoom: 0,
      launchable: 0,
      atLimit: [LAUNCH_LIMITS.COST_BUDGET],
    });
    // Billed by the 10 minutes, a launch commits a sixth of the hour: six fit below 1,000.
    expect(
      launchRoom({ ...dear, monthlyCostBudget: 1000, billingPeriodSeconds: 600 }, 0, 0, NOW, 5, 0, 0),
    ).toMatchObject({ budgetRoom: 6, launchable: 3 });
    // The price of its first offering wins over the pool's.
    const offered = {
      ...dear,
      specifications: { offerings: [{ instanceType: 'cx22', market: 'on-demand', pricePerHour: 0.5 }] },
    };
    expect(launchRoom(offered, 0, 0, NOW, 5, 0, 0)).toMatchObject({ budgetRoom: 2, launchable: 2 });
  });

  it('both budgets used up: both named, runtime first', () => {
    expect(
      launchRoom(pool({ monthlyRuntimeBudgetSeconds: 10, monthlyCostBudget: 1 }), 0, 10, NOW, 5, 0, 1).atLimit,
    ).toEqual([LAUNCH_LIMITS.MONTHLY_BUDGET, LAUNCH_LIMITS.COST_BUDGET]);
  });
});
