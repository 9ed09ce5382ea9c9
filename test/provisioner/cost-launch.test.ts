/**
 * The price an instance is recorded at, through the real provisioner cycle against the hetzner and
 * ec2 stand-ins (docs/operating/pools.md, "Cost"): the price of the offering that started it (after a
 * fallback, the next one's), a spot offering's maxPricePerHour when it gives no price, the pool's when
 * the offering has none.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useCloudTestApp } from './stand-ins/clouds.js';
import { createPool, createWorkspace, ok, sbuild, submitOk } from '../helpers/fixtures.js';
import { hetznerHourlyPrice } from '../../src/providers/hetzner.js';

const HZ_TOKEN = 'hz-token-cost-7Qp2';
const KEY_ID = 'AKIAZ7TAGSCHEDCOST01';
const SECRET = 'cost-secret-access-key-000000000001';
const AMI = 'ami-0123456789abcdef0';
const { clouds, t } = useCloudTestApp({
  hetznerToken: HZ_TOKEN,
  keyId: KEY_ID,
  secretAccessKey: SECRET,
  images: [AMI],
});

const SPECS = { enableTasks: ['sbuild'], enableBackends: ['unshare'], architectures: ['amd64'] };
const setEnabled = (name: string, enabled: boolean) =>
  ok(t, `mutation($n: String!, $e: Boolean) { updateWorkerPool(input: { name: $n, enabled: $e }) { __typename } }`, {
    n: name,
    e: enabled,
  });
const pricesOf = (pool: string) =>
  t.sql<{ price_per_hour: number | null; provider_id: string | null }>(
    `select i.price_per_hour, i.provider_id from instance i join worker_pool p on p.id = i.pool_id where p.name = ? and i.state <> 'FAILED' order by i.id`,
    [pool],
  );

beforeAll(async () => {
  await createWorkspace(t, 'cost/launch');
  await createPool(t, {
    name: 'cost-hz',
    providerType: 'hetzner',
    providerAccount: { token: HZ_TOKEN },
    pricePerHour: 0.02,
    enabled: false,
    specifications: {
      ...SPECS,
      providerImage: 'debian-12',
      offerings: [
        { instanceType: 'cpx31', location: 'nbg1', pricePerHour: 0.011 },
        { instanceType: 'cpx31', location: 'fsn1', pricePerHour: 0.015 },
      ],
    },
  });
  await createPool(t, {
    name: 'cost-ec2',
    providerType: 'ec2',
    providerAccount: { accessKeyId: KEY_ID, secretAccessKey: SECRET, region: 'eu-central-1' },
    pricePerHour: 0.1,
    enabled: false,
    specifications: {
      ...SPECS,
      providerImage: AMI,
      offerings: [
        { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'spot', maxPricePerHour: 0.05 },
        { instanceType: 'c6i.large', location: 'eu-central-1b', market: 'on-demand' },
      ],
    },
  });
});

describe('the price an instance is launched at', () => {
  it('hetzner: the offering that started it, after a fallback', async () => {
    clouds.hetzner.unavailable.add('cpx31@nbg1');
    await setEnabled('cost-hz', true);
    await submitOk(t, sbuild('cost/launch', 'one'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1 });
    const [instance] = await pricesOf('cost-hz');
    expect(instance!.provider_id).not.toBeNull();
    expect(instance!.price_per_hour).toBe(0.015);
    const { workerPool } = await ok(
      t,
      `{ workerPool(name: "cost-hz") { instances { edges { node { pricePerHour cost } } } } }`,
    );
    expect(workerPool.instances.edges[0].node.pricePerHour).toBe(0.015);
    expect(workerPool.instances.edges[0].node.cost).toBeGreaterThanOrEqual(0);
    await setEnabled('cost-hz', false);
    clouds.hetzner.unavailable.clear();
  });

  it('hetzner: without an offering price, the server type\u2019s gross hourly price in its location from the create answer, else the pool\u2019s', async () => {
    await t.sql(`update work_request set status = 'ABORTED', completed_at = now() where status = 'PENDING'`);
    await createPool(t, {
      name: 'cost-hz-list',
      providerType: 'hetzner',
      providerAccount: { token: HZ_TOKEN },
      pricePerHour: 0.02,
      maxActiveInstances: 1,
      specifications: { ...SPECS, providerImage: 'debian-12', offerings: [{ instanceType: 'cx22', location: 'nbg1' }] },
    });
    clouds.hetzner.prices.set('cx22@fsn1', '0.0071000000000000');
    clouds.hetzner.prices.set('cx22@nbg1', '0.0083300000000000');
    await submitOk(t, sbuild('cost/launch', 'listed'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1 });
    expect((await pricesOf('cost-hz-list')).map((i) => i.price_per_hour)).toEqual([0.00833]);

    // No price for the type in the answer: the pool's.
    clouds.hetzner.prices.clear();
    await t.sql(`update worker_pool set max_active_instances = 2 where name = 'cost-hz-list'`);
    await submitOk(t, sbuild('cost/launch', 'unlisted'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1 });
    expect((await pricesOf('cost-hz-list')).map((i) => i.price_per_hour)).toEqual([0.00833, 0.02]);
    await setEnabled('cost-hz-list', false);
  });

  it.each([
    [
      'its location\u2019s gross price',
      {
        server_type: { prices: [{ location: 'fsn1', price_hourly: { net: '1', gross: '1.19' } }] },
        datacenter: { location: { name: 'fsn1' } },
      },
      1.19,
    ],
    [
      'no entry for its location',
      {
        server_type: { prices: [{ location: 'hel1', price_hourly: { gross: '1.19' } }] },
        datacenter: { location: { name: 'fsn1' } },
      },
      null,
    ],
    [
      'not a number',
      {
        server_type: { prices: [{ location: 'fsn1', price_hourly: { gross: 'lots' } }] },
        datacenter: { location: { name: 'fsn1' } },
      },
      null,
    ],
    ['no prices at all', { server_type: { name: 'cx22' }, datacenter: { location: { name: 'fsn1' } } }, null],
    ['not an object', 'garbage', null],
  ])('hetznerHourlyPrice: %s', (_name, server, expected) => {
    expect(hetznerHourlyPrice(server)).toBe(expected);
  });

  it('ec2: a spot offering without a price is costed at its maximum; after a fallback to on-demand, at the pool’s price', async () => {
    await t.sql(`update work_request set status = 'ABORTED', completed_at = now() where status = 'PENDING'`);
    await setEnabled('cost-ec2', true);
    await submitOk(t, sbuild('cost/launch', 'two'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1 });
    expect((await pricesOf('cost-ec2')).map((i) => i.price_per_hour)).toEqual([0.05]);

    await t.sql(`delete from pool_offering_unavailable`);
    clouds.ec2.unavailable.set('spot:c6i.large@eu-central-1a', 'InsufficientInstanceCapacity');
    await t.sql(`update worker_pool set max_active_instances = 2 where name = 'cost-ec2'`);
    await submitOk(t, sbuild('cost/launch', 'three'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1 });
    expect((await pricesOf('cost-ec2')).map((i) => i.price_per_hour)).toEqual([0.05, 0.1]);
    await setEnabled('cost-ec2', false);
  });
});
