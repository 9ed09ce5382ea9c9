/**
 * The monthly cost budget is checked for each launch (docs/operating/pools.md, "Cost"), through the real
 * provisioner cycle: a pool launches while its committed cost this month (each live instance at least
 * its first hour, or billing period, of its price) is below its budget, so one cycle does not launch
 * past it. Demand says so beforehand (it plans no more launches than the budget has room for), and the
 * transaction that records each launch checks it again, with every launch recorded before it counted:
 * a provider's price above the pool's (which demand planned with) stops the next launch too.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPool, createWorkspace, ok, submitOk } from '../helpers/fixtures.js';
import { useCloudTestApp } from './stand-ins/clouds.js';

const HZ_TOKEN = 'hz-token-budget-4Kd8';
const KEY_ID = 'AKIAZ7TAGSCHEDBUDGET1';
const SECRET = 'budget-secret-access-key-0000000001';

// An exec command that starts nothing and answers every launch with a fresh id.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-budget-'));
const LAUNCHER = path.join(dir, 'launch.sh');
fs.writeFileSync(LAUNCHER, '#!/bin/sh\ncat >/dev/null\necho "{\\"id\\":\\"ex-$$\\"}"\n', { mode: 0o755 });
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const { clouds, t } = useCloudTestApp(
  { hetznerToken: HZ_TOKEN, keyId: KEY_ID, secretAccessKey: SECRET, images: [] },
  { providers: { execCommands: [LAUNCHER] } },
);

const noop = { workspace: 'budget/ws', taskType: 'worker', taskName: 'noop', taskData: {} };
const cycle = async () => (await t.app.provisioner.runCycle({ reconcile: false }))!;
const DEMAND = `{ provisioningDemand { pools { pool { name } launch limitedBy monthCost } } }`;
const demandOf = async (pool: string) =>
  (await ok(t, DEMAND)).provisioningDemand.pools.find((p: { pool: { name: string } }) => p.pool.name === pool);
const instancesOf = (pool: string) =>
  t.sql<{ state: string; price_per_hour: number | null }>(
    `select i.state, i.price_per_hour from instance i join worker_pool p on p.id = i.pool_id where p.name = ? order by i.id`,
    [pool],
  );

beforeAll(async () => {
  await createWorkspace(t, 'budget/ws');
});
beforeEach(async () => {
  await t.sql(`update work_request set status = 'ABORTED', completed_at = now() where status = 'PENDING'`);
  await t.sql(`update worker_pool set enabled = false`);
});

describe('the monthly cost budget, per launch', () => {
  it('an exec pool priced 1,000/h with a budget of 1 and four pending requests: one cycle launches one instance, and no later cycle another', async () => {
    await createPool(t, {
      name: 'dear',
      providerType: 'exec',
      pricePerHour: 1000,
      monthlyCostBudget: 1,
      maxActiveInstances: 10,
      specifications: { command: [LAUNCHER], enableTasks: ['noop'] },
    });
    for (let i = 0; i < 4; i++) await submitOk(t, noop);
    // Demand plans the one launch the budget has room for, and says what held the rest.
    expect(await demandOf('dear')).toMatchObject({ launch: 1, limitedBy: ['COST_BUDGET'], monthCost: 0 });

    expect(await cycle()).toMatchObject({ launched: 1, launchFailures: 0 });
    expect(await instancesOf('dear')).toEqual([{ state: 'LAUNCHING', price_per_hour: 1000 }]);
    // Its cost so far is a fraction of the budget, but the launch committed an hour of its price: nothing more.
    const after = await demandOf('dear');
    expect(after).toMatchObject({ launch: 0, limitedBy: ['COST_BUDGET'] });
    expect(after.monthCost).toBeLessThan(1);
    expect(await cycle()).toMatchObject({ launched: 0 });
    expect(await instancesOf('dear')).toHaveLength(1);
  });

  it('a provider’s price above the pool’s: the transaction that records the next launch finds the budget reached', async () => {
    await createPool(t, {
      name: 'cheap-looking',
      providerType: 'hetzner',
      providerAccount: { token: HZ_TOKEN },
      pricePerHour: 0.001,
      monthlyCostBudget: 1,
      maxActiveInstances: 10,
      specifications: {
        providerImage: 'debian-12',
        offerings: [{ instanceType: 'cx22', location: 'nbg1' }],
        enableTasks: ['noop'],
      },
    });
    clouds.hetzner.prices.set('cx22@nbg1', '1000.0000000000000000');
    for (let i = 0; i < 3; i++) await submitOk(t, noop);
    // Demand plans with the pool's price: room for all three.
    expect(await demandOf('cheap-looking')).toMatchObject({ launch: 3, limitedBy: [] });

    expect(await cycle()).toMatchObject({ launched: 1, launchFailures: 0 });
    expect((await instancesOf('cheap-looking')).map((i) => i.price_per_hour)).toEqual([1000]);
    expect(await demandOf('cheap-looking')).toMatchObject({ launch: 0, limitedBy: ['COST_BUDGET'] });
    clouds.hetzner.prices.clear();
  });
});
