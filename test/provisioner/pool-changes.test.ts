/**
 * Creating, enabling and changing a pool start a provisioner cycle at once: the provisioner hears
 * poolChanged, as it hears new work and workers, instead of waiting for its periodic cycle (an
 * hour here). Against the in-memory stand-in cloud of fake-cloud.ts, with the app started.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createPool, expectResult } from '../helpers/fixtures.js';
import { until } from '../faults/harness.js';
import { registerFakeCloud } from './fake-cloud.js';

const cloud = registerFakeCloud('fake-changes');
afterAll(() => cloud.unregister());

const t = useTestApp({
  provisioner: {
    enabled: true,
    agentServerUrl: 'http://tagsched.test/graphql',
    cycleIntervalMs: 3_600_000, // only the start's cycle and the triggered ones run in this test
    cycleDebounceMs: 50,
  },
});

const UPDATE = `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ... on WorkerPool { name } ... on Error { code message } } }`;
const launchedFor = (pool: string) => cloud.launches.filter((l) => l.spec.pool === pool).length;

beforeAll(async () => {
  await t.app.start();
  // The start's own cycle is queued behind a first cycle run now; a second one runs after it: when it
  // returns, no cycle is left that could launch for the pools these tests create, unless one is triggered.
  await t.app.provisioner.runCycle();
  await t.app.provisioner.runCycle();
});

describe('pool changes start a provisioner cycle', () => {
  it('a new pool with a minimum of idle instances gets them at once', async () => {
    await createPool(t, {
      name: 'warm',
      providerType: 'fake-changes',
      minIdleInstances: 1,
      specifications: { enableTasks: ['noop'] },
    });
    await until('the new pool launched its idle instance', () => launchedFor('warm') === 1 || null, 15_000, 50);
  });

  it('a disabled pool enabled, and a pool whose minimum was raised, launch at once', async () => {
    await createPool(t, {
      name: 'later',
      providerType: 'fake-changes',
      enabled: false,
      minIdleInstances: 1,
      specifications: { enableTasks: ['noop'] },
    });
    // Give a trigger time to act: a disabled pool launches nothing.
    await new Promise((r) => setTimeout(r, 500));
    expect(launchedFor('later')).toBe(0);
    await expectResult(t, 'WorkerPool', UPDATE, { i: { name: 'later', enabled: true } });
    await until('the enabled pool launched', () => launchedFor('later') === 1 || null, 15_000, 50);
    await expectResult(t, 'WorkerPool', UPDATE, { i: { name: 'later', minIdleInstances: 2, maxActiveInstances: 5 } });
    await until('the raised minimum launched', () => launchedFor('later') === 2 || null, 15_000, 50);
  });
});
