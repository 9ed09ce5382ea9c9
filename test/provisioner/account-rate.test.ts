/**
 * The launch rate of a provider account (TAGSCHED_ACCOUNT_LAUNCHES_PER_MINUTE), in one process with
 * the stand-in cloud of fake-cloud.ts: pools that share an account share its launches per minute;
 * a pool on another account has its own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, submitOk } from '../helpers/fixtures.js';
import { registerFakeCloud } from './fake-cloud.js';

const cloud = registerFakeCloud('fake-rate');
afterAll(() => cloud.unregister());
const t = useTestApp({
  provisioner: { enabled: true, agentServerUrl: 'http://tagsched.test/graphql', accountLaunchesPerMinute: 2 },
  providers: { callTimeoutMs: 300 },
});

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
});

describe('the launch rate of a provider account', () => {
  it('is shared by the pools on it, and apart for a pool on another account', async () => {
    const shared = { apiKey: 'account-one-0123456789' };
    // Each pool alone can run the noops (its own tag), three of them, three instances each.
    for (const [name, account] of [
      ['rate-a', shared],
      ['rate-b', shared],
      ['rate-c', { apiKey: 'account-two-9876543210' }],
    ] as const) {
      await createPool(t, {
        name,
        providerType: 'fake-rate',
        providerAccount: account,
        maxActiveInstances: 3,
        providedTags: [`worker:class:${name}`],
        specifications: { enableTasks: ['noop'] },
      });
      for (let i = 0; i < 3; i++)
        await submitOk(t, {
          workspace: 'debian/main',
          taskType: 'worker',
          taskName: 'noop',
          taskData: {},
          requiredTags: [`worker:class:${name}`],
        });
    }
    const report = (await t.app.provisioner.runCycle({ reconcile: false }))!;
    const byPool = (pool: string) => cloud.launches.filter((l) => l.spec.pool === pool).length;
    // The first account's two launches a minute, to its first pool; the second account's own two.
    expect([byPool('rate-a'), byPool('rate-b'), byPool('rate-c')]).toEqual([2, 0, 2]);
    expect(report.launched).toBe(4);
  });
});
