import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProviderError, type LaunchSpec } from '../../../src/providers/provider.js';
import {
  clientTokenOf,
  createEc2Provider,
  EC2_TAGS,
  launchTemplateNameOf,
  validateEc2Pool,
} from '../../../src/providers/ec2.js';
import { offeringsOf } from '../../../src/providers/offerings.js';
import { cloudInitUserData } from '../../../src/providers/user-data.js';
import { startEc2StandIn, type Ec2StandIn } from '../stand-ins/ec2.js';
import { captureLog, providerCall } from './capture-log.js';

const KEY_ID = 'AKIAZ7TAGSCHEDTEST01';
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYTAGSCHEDKEY';
const SESSION_KEY_ID = 'ASIAZ7TAGSCHEDTEST02';
const SESSION_SECRET = 'session-secret-access-key-0123456789';
const SESSION_TOKEN = 'FwoGZXIvYXdzEXAMPLESESSIONTOKEN0123456789';
const AMI = 'ami-0abcdef1234567890';
const account = { accessKeyId: KEY_ID, secretAccessKey: SECRET, region: 'eu-central-1' };
const SECRETS = [KEY_ID, SECRET, SESSION_KEY_ID, SESSION_SECRET, SESSION_TOKEN];

let api: Ec2StandIn;
let log: ReturnType<typeof captureLog>;

beforeAll(async () => {
  api = await startEc2StandIn({
    credentials: {
      [KEY_ID]: { secretAccessKey: SECRET },
      [SESSION_KEY_ID]: { secretAccessKey: SESSION_SECRET, sessionToken: SESSION_TOKEN },
    },
    images: [AMI],
  });
});
afterAll(() => api.close());
beforeEach(() => {
  api.instances.clear();
  api.requests.length = 0;
  api.instanceLimit = 1000;
  api.hang = false;
  log = captureLog();
});

const provider = (endpoint: string | null = api.url) => createEc2Provider({ endpoint, logger: log.logger });
const agent = {
  serverUrl: 'https://ci.example.org/graphql',
  activationToken: 'tsk_activation_ec2',
  workerName: 'aws-0001',
};
const spec = (name = 'aws-0001', specifications: Record<string, unknown> = {}): LaunchSpec => ({
  pool: 'aws',
  name,
  specifications: { instanceType: 'c6i.large', providerImage: AMI, ...specifications },
  agent: { ...agent, workerName: name },
  userData: cloudInitUserData({ ...agent, workerName: name }),
});

function expectNoSecret(text: string) {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  const e = err as ProviderError;
  expectNoSecret(`${e.message} ${e.providerCode} ${e.stack}`);
  return e;
}

describe('ec2 provider against the stand-in', () => {
  it('runs a tagged instance with the user data, lists it, terminates it, and terminates it again', async () => {
    const p = provider();
    const { id } = await p.launch(
      spec('aws-0001', {
        subnetId: 'subnet-0123456789abcdef0',
        securityGroupIds: ['sg-01234567', 'sg-89abcdef'],
        location: 'eu-central-1b',
      }),
      providerCall(account),
    );
    const instance = api.instances.get(id)!;
    expect(instance).toMatchObject({
      imageId: AMI,
      instanceType: 'c6i.large',
      userData: spec().userData,
      subnetId: 'subnet-0123456789abcdef0',
      securityGroupIds: ['sg-01234567', 'sg-89abcdef'],
      availabilityZone: 'eu-central-1b',
      clientToken: clientTokenOf('aws', 'aws-0001'),
      shutdownBehavior: 'terminate',
      tags: { Name: 'aws-0001', [EC2_TAGS.pool]: 'aws', [EC2_TAGS.instance]: 'aws-0001' },
      volumeTags: { Name: 'aws-0001', [EC2_TAGS.pool]: 'aws', [EC2_TAGS.instance]: 'aws-0001' },
    });
    expect(api.requests[0]).toMatchObject({
      action: 'RunInstances',
      accessKeyId: KEY_ID,
      params: { Version: '2016-11-15' },
    });
    api.seed({ tags: { [EC2_TAGS.pool]: 'other' }, state: 'running' });

    expect(await p.list('aws', providerCall(account))).toEqual([
      { id, name: 'aws-0001', state: 'starting', createdAt: expect.any(Date) },
    ]);
    instance.state = 'running';
    expect((await p.list('aws', providerCall(account)))[0]!.state).toBe('running');

    await p.terminate(id, providerCall(account));
    expect(instance.state).toBe('terminated');
    expect((await p.list('aws', providerCall(account)))[0]!.state).toBe('gone');
    await p.terminate(id, providerCall(account));
    api.instances.delete(id);
    await p.terminate(id, providerCall(account));
    expectNoSecret(log.text());
    expect(log.text()).not.toContain('tsk_activation_ec2');
  });

  it('signs with temporary credentials and their session token', async () => {
    const temporary = {
      accessKeyId: SESSION_KEY_ID,
      secretAccessKey: SESSION_SECRET,
      sessionToken: SESSION_TOKEN,
      region: 'us-east-1',
    };
    await provider().launch(spec(), providerCall(temporary));
    expect(api.requests.at(-1)!.accessKeyId).toBe(SESSION_KEY_ID);
    const without = await failure(provider().list('aws', providerCall({ ...temporary, sessionToken: undefined })));
    expect([without.kind, without.providerCode]).toEqual(['auth', 'AuthFailure']);
  });

  it('gets the same instance back when a launch is retried', async () => {
    const first = await provider().launch(spec(), providerCall(account));
    const again = await provider().launch(spec(), providerCall(account));
    expect(again).toEqual(first);
    expect(api.instances.size).toBe(1);
  });

  it('follows NextToken through a long list', async () => {
    for (let i = 0; i < 2100; i++)
      api.seed({
        state: 'running',
        tags: { [EC2_TAGS.pool]: i % 3 ? 'aws' : 'other', [EC2_TAGS.instance]: `aws-${i}` },
      });
    const listed = await provider().list('aws', providerCall(account));
    expect(listed).toHaveLength(1400);
    expect(new Set(listed.map((i) => i.id)).size).toBe(1400);
    expect(api.requests.map((r) => r.action)).toEqual(['DescribeInstances', 'DescribeInstances']);
    expect(api.requests[1]!.params.NextToken).toBeTruthy();
  });

  it('says auth for an unknown key id, a wrong secret, and an account without keys', async () => {
    const unknown = await failure(
      provider().list('aws', providerCall({ ...account, accessKeyId: 'AKIAUNKNOWNKEY000000' })),
    );
    expect([unknown.kind, unknown.providerCode]).toEqual(['auth', 'AuthFailure']);
    const wrongSecret = await failure(
      provider().list('aws', providerCall({ ...account, secretAccessKey: 'not-the-secret-access-key' })),
    );
    expect([wrongSecret.kind, wrongSecret.providerCode]).toEqual(['auth', 'SignatureDoesNotMatch']);
    const none = await failure(provider().list('aws', providerCall({ region: 'eu-central-1' })));
    expect([none.kind, none.providerCode]).toEqual(['auth', 'no_credentials']);
  });

  it('says quota when the instance limit is reached', async () => {
    api.instanceLimit = 1;
    await provider().launch(spec('aws-0001'), providerCall(account));
    const err = await failure(provider().launch(spec('aws-0002'), providerCall(account)));
    expect([err.kind, err.providerCode, err.retryable]).toEqual(['quota', 'InstanceLimitExceeded', true]);
    expect(err.message).toContain('instance limit of 1');
  });

  it('says invalid for an AMI that does not exist', async () => {
    const err = await failure(
      provider().launch(spec('aws-0001', { providerImage: 'ami-0123456789abcdef0' }), providerCall(account)),
    );
    expect([err.kind, err.providerCode, err.retryable]).toEqual(['invalid', 'InvalidAMIID.NotFound', false]);
  });

  it.each([
    [500, 'InsufficientInstanceCapacity', 'capacity'],
    [400, 'VcpuLimitExceeded', 'quota'],
    [503, 'RequestLimitExceeded', 'unavailable'],
    [400, 'Throttling', 'unavailable'],
    [403, 'UnauthorizedOperation', 'auth'],
    [400, 'InvalidParameterValue', 'invalid'],
    [400, 'InvalidSubnetID.NotFound', 'invalid'],
    [500, 'InternalError', 'unavailable'],
    [503, 'SomethingNew', 'unavailable'],
  ])('maps HTTP %i %s to %s', async (status, code, kind) => {
    api.failNext(status, code, `the cloud says ${code}`);
    const err = await failure(provider().launch(spec(), providerCall(account)));
    expect([err.kind, err.providerCode]).toEqual([kind, code]);
    expect(err.message).toContain(`the cloud says ${code}`);
    // One attempt: the SDK does not retry behind the provisioner's back.
    expect(api.requests).toHaveLength(1);
  });

  it('blanks the keys from an error message that quotes them', async () => {
    api.failNext(401, 'AuthFailure', `key ${KEY_ID} with secret ${SECRET} is not valid`);
    const err = await failure(provider().list('aws', providerCall(account)));
    expect(err.message).toContain('key [redacted] with secret [redacted]');
    expectNoSecret(log.text());
    expect(log.text()).toContain('[redacted]');
  });

  it('times out on an endpoint that does not answer', async () => {
    api.hang = true;
    const err = await failure(provider().launch(spec(), providerCall(account, 300)));
    expect([err.kind, err.providerCode, err.retryable]).toEqual(['timeout', 'timeout', true]);
  });

  it('says unavailable for an endpoint that cannot be reached', async () => {
    const err = await failure(provider('http://127.0.0.1:1').list('aws', providerCall(account)));
    expect(err.kind).toBe('unavailable');
  });

  it.each([
    ['an HTML page with 200', '<html>hello</html>', 200],
    ['an HTML page with 502', '<html>Bad Gateway</html>', 502],
    ['nothing with 200', '', 200],
  ])('refuses %s rather than read it as an empty list', async (_what, body, status) => {
    api.garbageNext(body, status);
    const err = await failure(provider().list('aws', providerCall(account)));
    expect([err.kind, err.providerCode]).toEqual(['unavailable', 'malformed_answer']);
    expect(err.message).toMatch(/^ec2 list: malformed answer: HTTP \d+/);
  });

  it('refuses to launch with specifications EC2 cannot take, before any request', async () => {
    const err = await failure(
      provider().launch(spec('aws-0001', { providerImage: 'debian-12' }), providerCall(account)),
    );
    expect([err.kind, err.providerCode]).toEqual(['invalid', 'invalid_specifications']);
    expect(err.message).toContain('providerImage');
    expect(api.requests).toEqual([]);
  });
});

describe('ec2 pool validation', () => {
  it('accepts a complete pool', () => {
    expect(
      validateEc2Pool({
        name: 'aws',
        specifications: {
          instanceType: 'm7g.large',
          providerImage: AMI,
          subnetId: 'subnet-01234567',
          securityGroupIds: ['sg-0123456789abcdef0'],
          location: 'eu-central-1a',
        },
        account,
      }),
    ).toEqual([]);
  });

  it('names every problem, and never a key', () => {
    const problems = validateEc2Pool({
      name: 'aws',
      specifications: {
        instanceType: 'large',
        providerImage: 'debian-12',
        subnetId: 'net-1',
        securityGroupIds: ['sg-01234567', 'default'],
        location: 'us-east-1a',
        command: ['/bin/true'],
      },
      account: { accessKeyId: 'lower-case-' + KEY_ID, secretAccessKey: 'short', region: 'Frankfurt', extra: SECRET },
    });
    expect(problems.map((p) => p.path)).toEqual([
      'input.specifications.instanceType',
      'input.specifications.providerImage',
      'input.specifications.subnetId',
      'input.specifications.command',
      'input.specifications.securityGroupIds[1]',
      'input.providerAccount.accessKeyId',
      'input.providerAccount.secretAccessKey',
      'input.providerAccount.region',
      'input.providerAccount.extra',
    ]);
    expect(problems.find((p) => p.path === 'input.providerAccount.region')!.message).toContain('eu-central-1');
    expectNoSecret(JSON.stringify(problems));
    expect(JSON.stringify(problems)).not.toContain('short');
  });

  it('checks the zone against the region, and asks for an account', () => {
    const problems = validateEc2Pool({
      name: 'aws',
      specifications: { instanceType: 'c6i.large', providerImage: AMI, location: 'us-east-1a' },
      account: null,
    });
    expect(problems.map((p) => p.path)).toEqual(['input.providerAccount']);
    const zone = validateEc2Pool({
      name: 'aws',
      specifications: { instanceType: 'c6i.large', providerImage: AMI, location: 'us-east-1a' },
      account,
    });
    expect(zone.map((p) => p.message)).toEqual([
      'input.specifications.location: "us-east-1a" is not an availability zone of the account\'s region eu-central-1',
    ]);
  });
});

describe('ec2 offerings: CreateFleet with fallback', () => {
  const offerings = [
    { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'spot', maxPricePerHour: 0.05 },
    { instanceType: 'c6a.large', location: 'eu-central-1b', market: 'spot' },
    { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'on-demand' },
    { instanceType: 'm6i.large', market: 'on-demand' },
  ];
  const fleetSpec = (name = 'aws-0001') => {
    const s = spec(name, { offerings, subnetId: 'subnet-0123456789abcdef0', securityGroupIds: ['sg-01234567'] });
    return { ...s, offerings: offeringsOf(s.specifications) };
  };

  beforeEach(() => {
    api.unavailable.clear();
    api.launchTemplates.clear();
    api.fleets.clear();
    api.spotPrice = 0.02;
  });

  it('asks CreateFleet for the offerings in order, one fleet per market run, and takes the first with room', async () => {
    api.unavailable.set('spot:c6i.large@eu-central-1a', 'InsufficientInstanceCapacity');
    api.unavailable.set('c6a.large@eu-central-1b', 'MaxSpotInstanceCountExceeded');
    const result = await provider().launch(fleetSpec(), providerCall(account));

    const fleets = api.requests.filter((r) => r.action === 'CreateFleet');
    expect(fleets).toHaveLength(2);
    const [spot, onDemand] = fleets.map((f) => f.params);
    expect(spot).toMatchObject({
      Type: 'instant',
      'TargetCapacitySpecification.TotalTargetCapacity': '1',
      'TargetCapacitySpecification.DefaultTargetCapacityType': 'spot',
      'SpotOptions.AllocationStrategy': 'capacity-optimized-prioritized',
      'LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName': launchTemplateNameOf('aws', 'aws-0001'),
      'LaunchTemplateConfigs.1.Overrides.1.InstanceType': 'c6i.large',
      'LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone': 'eu-central-1a',
      'LaunchTemplateConfigs.1.Overrides.1.MaxPrice': '0.05',
      'LaunchTemplateConfigs.1.Overrides.1.Priority': '0',
      'LaunchTemplateConfigs.1.Overrides.1.SubnetId': 'subnet-0123456789abcdef0',
      'LaunchTemplateConfigs.1.Overrides.2.InstanceType': 'c6a.large',
      'LaunchTemplateConfigs.1.Overrides.2.AvailabilityZone': 'eu-central-1b',
      'LaunchTemplateConfigs.1.Overrides.2.Priority': '1',
    });
    expect(spot!['LaunchTemplateConfigs.1.Overrides.3.InstanceType']).toBeUndefined();
    expect(onDemand).toMatchObject({
      'TargetCapacitySpecification.DefaultTargetCapacityType': 'on-demand',
      'OnDemandOptions.AllocationStrategy': 'prioritized',
      'LaunchTemplateConfigs.1.Overrides.1.InstanceType': 'c6i.large',
      'LaunchTemplateConfigs.1.Overrides.1.Priority': '0',
      'LaunchTemplateConfigs.1.Overrides.2.InstanceType': 'm6i.large',
      'LaunchTemplateConfigs.1.Overrides.2.Priority': '1',
    });
    expect(spot!.ClientToken).not.toBe(onDemand!.ClientToken);

    // The on-demand c6i.large in eu-central-1a had room: it started, with what RunInstances would have carried.
    expect(result.offering).toBe('on-demand:c6i.large@eu-central-1a');
    expect(result.unavailable).toEqual([
      {
        key: 'spot:c6i.large@eu-central-1a<=0.05',
        kind: 'capacity',
        code: 'InsufficientInstanceCapacity',
        reason: expect.stringContaining('InsufficientInstanceCapacity'),
      },
      {
        key: 'spot:c6a.large@eu-central-1b',
        kind: 'quota',
        code: 'MaxSpotInstanceCountExceeded',
        reason: expect.stringContaining('MaxSpotInstanceCountExceeded'),
      },
    ]);
    expect(api.instances.get(result.id)).toMatchObject({
      imageId: AMI,
      instanceType: 'c6i.large',
      availabilityZone: 'eu-central-1a',
      userData: spec().userData,
      securityGroupIds: ['sg-01234567'],
      shutdownBehavior: 'terminate',
      tags: { Name: 'aws-0001', [EC2_TAGS.pool]: 'aws', [EC2_TAGS.instance]: 'aws-0001' },
    });
    // The launch template held the user data for this launch only.
    expect(api.requests.map((r) => r.action)).toEqual([
      'CreateLaunchTemplate',
      'CreateFleet',
      'CreateFleet',
      'DeleteLaunchTemplate',
    ]);
    expect(api.launchTemplates.size).toBe(0);
    expectNoSecret(log.text());
  });

  it('answers SpotMaxPriceTooLow for a spot offering priced under the market, and falls back', async () => {
    api.spotPrice = 0.08;
    const result = await provider().launch(fleetSpec(), providerCall(account));
    expect(result.offering).toBe('spot:c6a.large@eu-central-1b');
    expect(result.unavailable).toEqual([
      expect.objectContaining({
        key: 'spot:c6i.large@eu-central-1a<=0.05',
        code: 'SpotMaxPriceTooLow',
        kind: 'capacity',
      }),
    ]);
  });

  it('fails naming every offering when none has room', async () => {
    for (const o of ['c6i.large@*', 'c6a.large@*', 'm6i.large@*'])
      api.unavailable.set(o, 'InsufficientInstanceCapacity');
    const e = await failure(provider().launch(fleetSpec(), providerCall(account)));
    expect(e.kind).toBe('capacity');
    expect(e.providerCode).toBe('InsufficientInstanceCapacity');
    expect(e.offeringFailures.map((f) => f.key)).toEqual([
      'spot:c6i.large@eu-central-1a<=0.05',
      'spot:c6a.large@eu-central-1b',
      'on-demand:c6i.large@eu-central-1a',
      'on-demand:m6i.large@*',
    ]);
    for (const words of [
      'c6i.large in eu-central-1a (spot, at most 0.05/h)',
      'c6a.large in eu-central-1b (spot)',
      'c6i.large in eu-central-1a (on-demand)',
      'm6i.large (on-demand)',
    ]) {
      expect(e.message).toContain(words);
    }
    expect(api.instances.size).toBe(0);
    expect(api.launchTemplates.size).toBe(0);
  });

  it('stops at an error that is not about capacity, keeping the offerings that failed before it', async () => {
    api.unavailable.set('c6i.large@eu-central-1a', 'InsufficientInstanceCapacity');
    api.unavailable.set('c6a.large@eu-central-1b', 'InvalidParameterValue');
    const e = await failure(provider().launch(fleetSpec(), providerCall(account)));
    expect([e.kind, e.providerCode]).toEqual(['invalid', 'InvalidParameterValue']);
    expect(e.offeringFailures.map((f) => f.key)).toEqual(['spot:c6i.large@eu-central-1a<=0.05']);
    expect(api.requests.filter((r) => r.action === 'CreateFleet')).toHaveLength(1);
  });

  it('a pool with one instanceType still uses RunInstances, and its capacity error names its one offering', async () => {
    api.failNext(500, 'InsufficientInstanceCapacity', 'We currently do not have sufficient c6i.large capacity');
    const e = await failure(provider().launch(spec(), providerCall(account)));
    expect(e.kind).toBe('capacity');
    expect(e.offeringFailures).toEqual([
      expect.objectContaining({ key: 'on-demand:c6i.large@*', code: 'InsufficientInstanceCapacity' }),
    ]);
    expect(api.requests.map((r) => r.action)).toEqual(['RunInstances']);
  });

  it('checks every offering with its path', () => {
    const problems = validateEc2Pool({
      name: 'aws',
      specifications: {
        providerImage: AMI,
        offerings: [
          { instanceType: 'c6i.large' },
          { instanceType: 'C6I LARGE', location: 'us-east-1a', market: 'spot' },
        ],
      },
      account,
    });
    expect(problems.map((p) => p.path)).toEqual([
      'input.specifications.offerings[1].instanceType',
      'input.specifications.offerings[1].location',
    ]);
  });
});
