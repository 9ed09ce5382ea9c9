/** A pool's room to launch (rules/pool-capacity.ts), table-tested: the one rule demand and the diagnosis share. */
import { describe, expect, it } from 'vitest';
import { LAUNCH_LIMITS, launchRoom } from '../../../src/scheduler/rules/pool-capacity.js';

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
    ['more than its maximum (the maximum was lowered)', pool(), 5, 0, { room: 0, launchable: 0, atLimit: [LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES] }],
    ['budget used up', pool({ monthlyRuntimeBudgetSeconds: 3600 }), 0, 3600, { room: 3, launchable: 0, atLimit: [LAUNCH_LIMITS.MONTHLY_BUDGET] }],
    ['budget not yet used up', pool({ monthlyRuntimeBudgetSeconds: 3600 }), 0, 3599, { room: 3, launchable: 3, atLimit: [] }],
    [
      'backing off after a failed launch',
      pool({ launchFailures: 1, launchRetryAt: new Date(NOW.getTime() + 60_000), lastErrorKind: 'capacity' }),
      0,
      0,
      { room: 3, launchable: 0, atLimit: [LAUNCH_LIMITS.BACKOFF] },
    ],
    ['the backoff over', pool({ launchFailures: 1, launchRetryAt: new Date(NOW.getTime() - 1), lastErrorKind: 'capacity' }), 0, 0, { room: 3, launchable: 3, atLimit: [] }],
    [
      'every limit at once, in demand order',
      pool({ monthlyRuntimeBudgetSeconds: 10, launchFailures: 2, launchRetryAt: new Date(NOW.getTime() + 1000) }),
      3,
      20,
      { room: 0, launchable: 0, atLimit: [LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES, LAUNCH_LIMITS.MONTHLY_BUDGET, LAUNCH_LIMITS.BACKOFF] },
    ],
  ])('%s', (_name, p, instances, runtime, expected) => {
    expect(launchRoom(p, instances, runtime, NOW, 5)).toMatchObject(expected);
  });

  it.each([
    ['cost budget used up', 10, 10, { launchable: 0, overCostBudget: true, atLimit: [LAUNCH_LIMITS.COST_BUDGET] }],
    ['cost budget over', 10, 12.5, { launchable: 0, overCostBudget: true, atLimit: [LAUNCH_LIMITS.COST_BUDGET] }],
    ['cost budget not yet used up', 10, 9.99, { launchable: 3, overCostBudget: false, atLimit: [] }],
    ['a budget of 0 launches nothing', 0, 0, { launchable: 0, overCostBudget: true, atLimit: [LAUNCH_LIMITS.COST_BUDGET] }],
    ['no cost budget', null, 1e9, { launchable: 3, overCostBudget: false, atLimit: [] }],
  ])('%s', (_name, monthlyCostBudget, cost, expected) => {
    expect(launchRoom(pool({ monthlyCostBudget }), 0, 0, NOW, 5, 0, cost)).toMatchObject(expected);
  });

  it('both budgets used up: both named, runtime first', () => {
    expect(launchRoom(pool({ monthlyRuntimeBudgetSeconds: 10, monthlyCostBudget: 1 }), 0, 10, NOW, 5, 0, 1).atLimit).toEqual([
      LAUNCH_LIMITS.MONTHLY_BUDGET,
      LAUNCH_LIMITS.COST_BUDGET,
    ]);
  });
});
