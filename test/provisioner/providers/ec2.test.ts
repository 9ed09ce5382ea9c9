import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProviderError, type LaunchSpec } from '../../../src/provisioner/provider.js';
import { clientTokenOf, createEc2Provider, EC2_TAGS, validateEc2Pool } from '../../../src/provisioner/providers/ec2.js';
import { cloudInitUserData } from '../../../src/provisioner/user-data.js';
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
    credentials: { [KEY_ID]: { secretAccessKey: SECRET }, [SESSION_KEY_ID]: { secretAccessKey: SESSION_SECRET, sessionToken: SESSION_TOKEN } },
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
const agent = { serverUrl: 'https://ci.example.org/graphql', activationToken: 'tsk_activation_ec2', workerName: 'aws-0001' };
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
      spec('aws-0001', { subnetId: 'subnet-0123456789abcdef0', securityGroupIds: ['sg-01234567', 'sg-89abcdef'], location: 'eu-central-1b' }),
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
    expect(api.requests[0]).toMatchObject({ action: 'RunInstances', accessKeyId: KEY_ID, params: { Version: '2016-11-15' } });
    api.seed({ tags: { [EC2_TAGS.pool]: 'other' }, state: 'running' });

    expect(await p.list('aws', providerCall(account))).toEqual([{ id, name: 'aws-0001', state: 'starting', createdAt: expect.any(Date) }]);
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
    const temporary = { accessKeyId: SESSION_KEY_ID, secretAccessKey: SESSION_SECRET, sessionToken: SESSION_TOKEN, region: 'us-east-1' };
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
    for (let i = 0; i < 2100; i++) api.seed({ state: 'running', tags: { [EC2_TAGS.pool]: i % 3 ? 'aws' : 'other', [EC2_TAGS.instance]: `aws-${i}` } });
    const listed = await provider().list('aws', providerCall(account));
    expect(listed).toHaveLength(1400);
    expect(new Set(listed.map((i) => i.id)).size).toBe(1400);
    expect(api.requests.map((r) => r.action)).toEqual(['DescribeInstances', 'DescribeInstances']);
    expect(api.requests[1]!.params.NextToken).toBeTruthy();
  });

  it('says auth for an unknown key id, a wrong secret, and an account without keys', async () => {
    const unknown = await failure(provider().list('aws', providerCall({ ...account, accessKeyId: 'AKIAUNKNOWNKEY000000' })));
    expect([unknown.kind, unknown.providerCode]).toEqual(['auth', 'AuthFailure']);
    const wrongSecret = await failure(provider().list('aws', providerCall({ ...account, secretAccessKey: 'not-the-secret-access-key' })));
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
    const err = await failure(provider().launch(spec('aws-0001', { providerImage: 'ami-0123456789abcdef0' }), providerCall(account)));
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
    const err = await failure(provider().launch(spec('aws-0001', { providerImage: 'debian-12' }), providerCall(account)));
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
        specifications: { instanceType: 'm7g.large', providerImage: AMI, subnetId: 'subnet-01234567', securityGroupIds: ['sg-0123456789abcdef0'], location: 'eu-central-1a' },
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
    const problems = validateEc2Pool({ name: 'aws', specifications: { instanceType: 'c6i.large', providerImage: AMI, location: 'us-east-1a' }, account: null });
    expect(problems.map((p) => p.path)).toEqual(['input.providerAccount']);
    const zone = validateEc2Pool({ name: 'aws', specifications: { instanceType: 'c6i.large', providerImage: AMI, location: 'us-east-1a' }, account });
    expect(zone.map((p) => p.message)).toEqual(['input.specifications.location: "us-east-1a" is not an availability zone of the account\'s region eu-central-1']);
  });
});
