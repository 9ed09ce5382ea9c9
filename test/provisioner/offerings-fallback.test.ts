/**
 * Offerings with fallback through the provisioner (docs/operating/pools.md, "Offerings"): the real
 * cycle, the real database, GraphQL, and the ec2 and hetzner providers against their stand-ins. An
 * offering the cloud has no room for is marked unavailable in the database (for every server
 * process), the next one starts the machine in the same cycle, and the pool, its page and the demand
 * show what is unavailable, until when and why.
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useCloudTestApp } from './stand-ins/clouds.js';
import { createWorkspace, ERROR_FIELDS, ok, sbuild, submitOk } from '../helpers/fixtures.js';

const HZ_TOKEN = 'hz-token-offerings-4Jd8';
const KEY_ID = 'AKIAZ7TAGSCHEDOFF001';
const SECRET = 'offerings-secret-access-key-00001';
const AMI = 'ami-0123456789abcdef0';
const { clouds, t } = useCloudTestApp(
  { hetznerToken: HZ_TOKEN, keyId: KEY_ID, secretAccessKey: SECRET, images: [AMI] },
  { provisioner: { offeringUnavailableMs: 180_000 } },
);

const PROBLEMS = `... on InputError { problems { message path } }`;
const CREATE_POOL = `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on WorkerPool { name } ${ERROR_FIELDS} ${PROBLEMS} } }`;
const createPool = async (input: Record<string, unknown>) => (await ok(t, CREATE_POOL, { i: input })).createWorkerPool;
const OFFERINGS = `offerings { instanceType location market maxPricePerHour key unavailableUntil unavailableReason }`;
const poolOfferings = async (name: string) =>
  (
    await ok(
      t,
      `query($n: String!) { workerPool(name: $n) { specifications { offerings { instanceType location market maxPricePerHour } } ${OFFERINGS} } }`,
      { n: name },
    )
  ).workerPool;
const setEnabled = (name: string, enabled: boolean) =>
  ok(t, `mutation($n: String!, $e: Boolean) { updateWorkerPool(input: { name: $n, enabled: $e }) { __typename } }`, {
    n: name,
    e: enabled,
  });

const ec2Offerings = [
  { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'spot', maxPricePerHour: 0.05 },
  { instanceType: 'c6i.large', location: 'eu-central-1b', market: 'on-demand' },
  { instanceType: 'm6i.large', location: 'eu-central-1b', market: 'on-demand' },
];
const hzOfferings = [
  { instanceType: 'cpx31', location: 'nbg1' },
  { instanceType: 'cpx31', location: 'fsn1' },
];

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  expect(
    await createPool({
      name: 'off-ec2',
      providerType: 'ec2',
      providerAccount: { accessKeyId: KEY_ID, secretAccessKey: SECRET, region: 'eu-central-1' },
      specifications: {
        providerImage: AMI,
        offerings: ec2Offerings,
        enableTasks: ['sbuild'],
        enableBackends: ['unshare'],
        architectures: ['amd64'],
      },
      enabled: false,
    }),
  ).toEqual({ __typename: 'WorkerPool', name: 'off-ec2' });
  expect(
    await createPool({
      name: 'off-hz',
      providerType: 'hetzner',
      providerAccount: { token: HZ_TOKEN },
      specifications: {
        providerImage: 'debian-12',
        offerings: hzOfferings,
        enableTasks: ['sbuild'],
        enableBackends: ['unshare'],
        architectures: ['amd64'],
      },
      enabled: false,
    }),
  ).toEqual({ __typename: 'WorkerPool', name: 'off-hz' });
});

beforeEach(async () => {
  clouds.ec2.unavailable.clear();
  clouds.hetzner.unavailable.clear();
  await t.sql(`delete from pool_offering_unavailable`);
  await t.sql(`update worker_pool set launch_failures = 0, launch_retry_at = null`);
});

describe('offerings through the provisioner', () => {
  it('keeps the offerings as given, and shows each with no mark before any launch', async () => {
    const pool = await poolOfferings('off-ec2');
    expect(pool.specifications.offerings).toEqual([
      { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'spot', maxPricePerHour: 0.05 },
      { instanceType: 'c6i.large', location: 'eu-central-1b', market: 'on-demand', maxPricePerHour: null },
      { instanceType: 'm6i.large', location: 'eu-central-1b', market: 'on-demand', maxPricePerHour: null },
    ]);
    expect(pool.offerings.map((o: { key: string; unavailableUntil: unknown }) => [o.key, o.unavailableUntil])).toEqual([
      ['spot:c6i.large@eu-central-1a<=0.05', null],
      ['on-demand:c6i.large@eu-central-1b', null],
      ['on-demand:m6i.large@eu-central-1b', null],
    ]);
  });

  it('ec2: falls back to the next offering in the same cycle, marks the one without capacity', async () => {
    await setEnabled('off-ec2', true);
    clouds.ec2.unavailable.set('spot:c6i.large@eu-central-1a', 'InsufficientInstanceCapacity');
    clouds.ec2.requests.length = 0;
    await submitOk(t, sbuild('debian/main'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1, launchFailures: 0 });

    const fleets = clouds.ec2.requests.filter((r) => r.action === 'CreateFleet');
    expect(fleets.map((f) => f.params['TargetCapacitySpecification.DefaultTargetCapacityType'])).toEqual([
      'spot',
      'on-demand',
    ]);
    expect(fleets[1]!.params).toMatchObject({
      'LaunchTemplateConfigs.1.Overrides.1.InstanceType': 'c6i.large',
      'LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone': 'eu-central-1b',
      'LaunchTemplateConfigs.1.Overrides.2.InstanceType': 'm6i.large',
    });
    const [started] = [...clouds.ec2.instances.values()];
    expect(started).toMatchObject({ instanceType: 'c6i.large', availabilityZone: 'eu-central-1b' });
    const instances = await t.sql<{ state: string; provider_id: string }>(
      `select i.state, i.provider_id from instance i join worker_pool p on p.id = i.pool_id where p.name = 'off-ec2'`,
    );
    expect(instances).toEqual([{ state: 'LAUNCHING', provider_id: started!.id }]);

    // The mark is in the database, for every server process; GraphQL and the demand show it.
    const marks = await t.sql<{ offering_key: string; reason: string }>(
      `select offering_key, reason from pool_offering_unavailable`,
    );
    expect(marks).toEqual([
      {
        offering_key: 'spot:c6i.large@eu-central-1a<=0.05',
        reason: expect.stringContaining('InsufficientInstanceCapacity'),
      },
    ]);
    const pool = await poolOfferings('off-ec2');
    expect(pool.offerings[0]).toMatchObject({
      key: 'spot:c6i.large@eu-central-1a<=0.05',
      unavailableReason: expect.stringContaining('InsufficientInstanceCapacity'),
    });
    const until = new Date(pool.offerings[0].unavailableUntil).getTime();
    expect(until).toBeGreaterThan(Date.now() + 170_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 180_000);
    expect(pool.offerings[1].unavailableUntil).toBeNull();
    const demand = await ok(
      t,
      `{ provisioningDemand { pools { pool { name } unavailableOfferings { key unavailableUntil unavailableReason } } } }`,
    );
    const mine = demand.provisioningDemand.pools.find((p: { pool: { name: string } }) => p.pool.name === 'off-ec2');
    expect(mine.unavailableOfferings).toEqual([
      {
        key: 'spot:c6i.large@eu-central-1a<=0.05',
        unavailableUntil: pool.offerings[0].unavailableUntil,
        unavailableReason: expect.any(String),
      },
    ]);
    expect(JSON.stringify(demand)).not.toContain(SECRET);

    await setEnabled('off-ec2', false);
  });

  it('hetzner: tries the next location in the same cycle and marks the one without room', async () => {
    await setEnabled('off-hz', true);
    clouds.hetzner.unavailable.add('cpx31@nbg1');
    clouds.hetzner.requests.length = 0;
    await submitOk(t, sbuild('debian/main', 'hello'));
    // (the request the ec2 pool, now disabled, launched for is pending too: this pool may launch for both)
    const report = (await t.app.provisioner.runCycle({ reconcile: false }))!;
    expect(report).toMatchObject({ launchFailures: 0 });
    expect(report.launched).toBeGreaterThanOrEqual(1);
    const posts = clouds.hetzner.requests
      .filter((r) => r.method === 'POST' && r.path === '/v1/servers')
      .map((r) => (r.body as { location: string }).location);
    // The first launch tried nbg1, then fsn1; a later launch of the same cycle skips the marked nbg1.
    expect(posts).toEqual(['nbg1', ...Array<string>(report.launched).fill('fsn1')]);
    const marks = await t.sql<{ offering_key: string; reason: string }>(
      `select offering_key, reason from pool_offering_unavailable`,
    );
    expect(marks).toEqual([
      { offering_key: 'on-demand:cpx31@nbg1', reason: expect.stringContaining('resource_unavailable') },
    ]);
    expect(JSON.stringify(marks)).not.toContain(HZ_TOKEN);
    await setEnabled('off-hz', false);
  });

  it('a pool whose every offering is unavailable fails the launch with a reason naming each, and asks the cloud nothing more', async () => {
    await setEnabled('off-hz', true);
    clouds.hetzner.unavailable.add('cpx31@nbg1');
    clouds.hetzner.unavailable.add('cpx31@fsn1');
    await submitOk(t, sbuild('debian/main', 'world'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 0, launchFailures: 1 });
    const [failed] = await t.sql<{ error: string }>(
      `select error from instance i join worker_pool p on p.id = i.pool_id where p.name = 'off-hz' and i.state = 'FAILED'`,
    );
    expect(failed!.error).toContain('cpx31 in nbg1 (on-demand)');
    expect(failed!.error).toContain('cpx31 in fsn1 (on-demand)');
    const marked = await t.sql<{ offering_key: string }>(
      `select offering_key from pool_offering_unavailable order by offering_key`,
    );
    expect(marked.map((m) => m.offering_key)).toEqual(['on-demand:cpx31@fsn1', 'on-demand:cpx31@nbg1']);

    // Its backoff over, the next cycle finds every offering still marked: no instance, no request, a reason naming each.
    await t.sql(`update worker_pool set launch_retry_at = null where name = 'off-hz'`);
    clouds.hetzner.requests.length = 0;
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 0, launchFailures: 1 });
    expect(clouds.hetzner.requests.filter((r) => r.method === 'POST')).toEqual([]);
    const pool = (await ok(t, `{ workerPool(name: "off-hz") { lastError lastErrorKind ${OFFERINGS} } }`)).workerPool;
    expect(pool.lastErrorKind).toBe('capacity');
    expect(pool.lastError).toMatch(
      /every offering is unavailable: cpx31 in nbg1 \(on-demand\) until \S+ \(.*resource_unavailable.*\); cpx31 in fsn1 \(on-demand\) until/,
    );
    expect(pool.offerings.every((o: { unavailableUntil: string | null }) => o.unavailableUntil !== null)).toBe(true);

    // Marks expire: once they have, the pool's offerings are tried again.
    await t.sql(`update pool_offering_unavailable set until = now() - interval '1 second'`);
    await t.sql(`update worker_pool set launch_retry_at = null where name = 'off-hz'`);
    clouds.hetzner.unavailable.clear();
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1 });
    await setEnabled('off-hz', false);
  });
});

describe('offerings as input', () => {
  const hz = (specifications: Record<string, unknown>) =>
    createPool({ name: 'off-bad', providerType: 'hetzner', providerAccount: { token: HZ_TOKEN }, specifications });

  it('names every bad value with its path', async () => {
    const bad = await hz({
      providerImage: 'debian-12',
      offerings: [
        { instanceType: 'cpx31' },
        { instanceType: 'cpx31', location: 'fsn1', market: 'auction' },
        { instanceType: 'cx22', maxPricePerHour: 0.1 },
        { instanceType: 'cx22', market: 'spot' },
      ],
    });
    expect(bad.__typename).toBe('InputError');
    expect(bad.problems.map((p: { path: string }) => p.path)).toEqual(
      expect.arrayContaining([
        'input.specifications.offerings[1].market',
        'input.specifications.offerings[2].maxPricePerHour',
      ]),
    );
    // A spot maximum nearer 0 than a real price: EC2 would get "1e-320", and the month's cost sum would underflow.
    const tiny = await createPool({
      name: 'off-tiny',
      providerType: 'ec2',
      providerAccount: { accessKeyId: KEY_ID, secretAccessKey: SECRET, region: 'eu-central-1' },
      specifications: {
        providerImage: AMI,
        offerings: [{ instanceType: 'c6i.large', market: 'spot', maxPricePerHour: 1e-320 }],
      },
    });
    expect(tiny.problems).toEqual([
      {
        path: 'input.specifications.offerings[0].maxPricePerHour',
        message: expect.stringContaining('at least 0.0001'),
      },
    ]);
    const spot = await hz({
      providerImage: 'debian-12',
      offerings: [{ instanceType: 'cpx31' }, { instanceType: 'cx22', market: 'spot' }],
    });
    expect(spot.problems).toEqual([
      { path: 'input.specifications.offerings[1].market', message: expect.stringContaining('no spot market') },
    ]);
  });

  it('refuses offerings beside instanceType and location, too many, twice the same, and none', async () => {
    const both = await hz({
      providerImage: 'debian-12',
      instanceType: 'cx22',
      location: 'nbg1',
      offerings: [{ instanceType: 'cpx31' }],
    });
    expect(both.problems.map((p: { path: string }) => p.path)).toEqual([
      'input.specifications.instanceType',
      'input.specifications.location',
    ]);
    const many = await hz({
      providerImage: 'debian-12',
      offerings: Array.from({ length: 21 }, (_, i) => ({ instanceType: `cx${i}` })),
    });
    expect(many.problems).toEqual([
      { path: 'input.specifications.offerings', message: expect.stringContaining('at most 20') },
    ]);
    const twice = await hz({
      providerImage: 'debian-12',
      offerings: [
        { instanceType: 'cx22', location: 'nbg1' },
        { instanceType: 'cx22', location: 'nbg1', market: 'on-demand' },
      ],
    });
    expect(twice.problems).toEqual([
      { path: 'input.specifications.offerings[1]', message: expect.stringContaining('given twice') },
    ]);
    const none = await hz({ providerImage: 'debian-12', offerings: [] });
    expect(none.problems.map((p: { path: string }) => p.path)).toEqual(['input.specifications.offerings']);
    const nul = await hz({ providerImage: 'debian-12', offerings: [{ instanceType: 'cx\u000022' }] });
    expect(nul.problems.map((p: { path: string }) => p.path)).toContain(
      'input.specifications.offerings[0].instanceType',
    );
    const huge = await hz({
      providerImage: 'debian-12',
      offerings: [{ instanceType: 'cx22', market: 'spot', maxPricePerHour: 1e308 }],
    });
    expect(huge.__typename).toBe('InputError');
  });

  it('a pool with only instanceType has one on-demand offering', async () => {
    const made = await createPool({
      name: 'off-single',
      providerType: 'hetzner',
      providerAccount: { token: HZ_TOKEN },
      specifications: { providerImage: 'debian-12', instanceType: 'cx22', location: 'nbg1' },
      enabled: false,
    });
    expect(made.__typename).toBe('WorkerPool');
    const pool = await poolOfferings('off-single');
    expect(pool.specifications.offerings).toEqual([]);
    expect(pool.offerings).toEqual([
      {
        instanceType: 'cx22',
        location: 'nbg1',
        market: 'on-demand',
        maxPricePerHour: null,
        key: 'on-demand:cx22@nbg1',
        unavailableUntil: null,
        unavailableReason: null,
      },
    ]);
  });
});

describe('the pool page', () => {
  it('lists the offerings in order, the unavailable ones with until when and why', async () => {
    await t.sql(
      `insert into pool_offering_unavailable (pool_id, offering_key, until, reason)
       select id, 'on-demand:cpx31@nbg1', now() + interval '2 minutes', 'hetzner launch: server type cpx31 is <unavailable> in location nbg1 (resource_unavailable)' from worker_pool where name = 'off-hz'`,
    );
    const { url } = await t.app.start();
    const page = await (await fetch(url.replace(/\/graphql$/, '/-/status/pools/off-hz/'))).text();
    const section = page.slice(page.indexOf('<h2>Offerings</h2>'), page.indexOf('<h2>Instances</h2>'));
    expect(section).toContain('<code>cpx31</code>');
    expect(section.indexOf('nbg1')).toBeLessThan(section.indexOf('fsn1'));
    expect(section).toMatch(/unavailable<\/span> until/);
    // The provider's words, escaped.
    expect(section).toContain('is &lt;unavailable&gt; in location nbg1 (resource_unavailable)');
    expect(section).toContain('usable');
    expect(page).not.toContain(HZ_TOKEN);
  });
});
