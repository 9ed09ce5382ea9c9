/**
 * A pool's scale-in, retirement and warm-capacity settings through the API: set, read back, removed
 * with null, and every bad value refused with its path and nothing written.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS, createPool, ok, snapshot } from '../helpers/fixtures.js';

const t = useTestApp();

const FIELDS = `billingPeriodSeconds scaleDownDelaySeconds maxLaunchesPerMinute maxReplacingInstances maxWorkRequestsPerInstance maxInstanceLifetimeSeconds
  minIdleInstancesNow warmSchedule { timeZone periods { days from to minIdleInstances } }`;
const UPDATE = `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ... on WorkerPool { ${FIELDS} } ${ERROR_FIELDS} ... on InputError { problems { path message } } } }`;

describe('scale-in settings of a pool', () => {
  it('are set, read back and removed with null', async () => {
    await createPool(t, { name: 'scaling' });
    const warmSchedule = {
      timeZone: 'Europe/Berlin',
      periods: [{ days: ['MON', 'FRI'], from: '07:00', to: '24:00', minIdleInstances: 2 }],
    };
    const values = {
      billingPeriodSeconds: 3600,
      scaleDownDelaySeconds: 900,
      maxLaunchesPerMinute: 5,
      maxReplacingInstances: 2,
      maxWorkRequestsPerInstance: 1,
      maxInstanceLifetimeSeconds: 86400,
      warmSchedule,
    };
    const set = await ok(t, UPDATE, { i: { name: 'scaling', ...values } });
    expect(set.updateWorkerPool).toMatchObject({ __typename: 'WorkerPool', ...values });
    const cleared = await ok(t, UPDATE, {
      i: {
        name: 'scaling',
        billingPeriodSeconds: null,
        scaleDownDelaySeconds: null,
        maxLaunchesPerMinute: null,
        maxWorkRequestsPerInstance: null,
        maxInstanceLifetimeSeconds: null,
        warmSchedule: null,
      },
    });
    expect(cleared.updateWorkerPool).toMatchObject({
      billingPeriodSeconds: null,
      scaleDownDelaySeconds: null,
      maxLaunchesPerMinute: null,
      maxWorkRequestsPerInstance: null,
      maxInstanceLifetimeSeconds: null,
      warmSchedule: null,
      maxReplacingInstances: 2,
      minIdleInstancesNow: 0,
    });
  });

  it('refuses every bad value with its path, and writes nothing', async () => {
    await createPool(t, { name: 'bad-scaling' });
    const before = await snapshot(t, ['worker_pool']);
    const r = await ok(t, UPDATE, {
      i: {
        name: 'bad-scaling',
        billingPeriodSeconds: 10,
        scaleDownDelaySeconds: 10 ** 9,
        maxLaunchesPerMinute: 0,
        maxReplacingInstances: 0,
        maxWorkRequestsPerInstance: 0,
        maxInstanceLifetimeSeconds: 5,
        warmSchedule: {
          timeZone: 'Mars/Olympus',
          periods: [
            { days: [], from: '9:00', to: '08:00', minIdleInstances: -1 },
            { days: ['SUN'], from: '18:00', to: '08:00', minIdleInstances: 1 },
          ],
        },
      },
    });
    expect(r.updateWorkerPool.__typename).toBe('InputError');
    const paths = (r.updateWorkerPool.problems as { path: string }[]).map((p) => p.path).sort();
    expect(paths).toEqual(
      [
        'input.billingPeriodSeconds',
        'input.maxInstanceLifetimeSeconds',
        'input.maxLaunchesPerMinute',
        'input.maxReplacingInstances',
        'input.maxWorkRequestsPerInstance',
        'input.scaleDownDelaySeconds',
        'input.warmSchedule.periods[0].days',
        'input.warmSchedule.periods[0].from',
        'input.warmSchedule.periods[0].minIdleInstances',
        'input.warmSchedule.periods[1].to',
        'input.warmSchedule.timeZone',
      ].sort(),
    );
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
    const nul = await ok(t, UPDATE, {
      i: { name: 'bad-scaling', warmSchedule: { timeZone: 'UTC\u0000', periods: [] } },
    });
    expect(nul.updateWorkerPool).toMatchObject({ __typename: 'InputError', path: 'input.warmSchedule.timeZone' });
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
  });
});
