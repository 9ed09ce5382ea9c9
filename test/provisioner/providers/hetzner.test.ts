import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ProviderError, type LaunchSpec } from '../../../src/providers/provider.js';
import { createHetznerProvider, HETZNER_LABELS, validateHetznerPool } from '../../../src/providers/hetzner.js';
import { offeringsOf } from '../../../src/providers/offerings.js';
import { cloudInitUserData } from '../../../src/providers/user-data.js';
import { startHetznerStandIn, type HetznerStandIn } from '../stand-ins/hetzner.js';
import { captureLog, providerCall } from './capture-log.js';

const TOKEN = 'hcloud-token-Zq81LmVx0pWd3sYt';
const account = { token: TOKEN };
let api: HetznerStandIn;
let log: ReturnType<typeof captureLog>;

beforeAll(async () => {
  api = await startHetznerStandIn({ tokens: [TOKEN] });
});
afterAll(() => api.close());
beforeEach(() => {
  api.servers.clear();
  api.requests.length = 0;
  api.maxServers = 1000;
  api.hang = false;
  log = captureLog();
});

const provider = (apiUrl = api.url) => createHetznerProvider({ apiUrl, logger: log.logger });
const agent = {
  serverUrl: 'https://ci.example.org/graphql',
  activationToken: 'tsk_activation_hz1',
  workerName: 'hz-0001',
};
const spec = (name = 'hz-0001'): LaunchSpec => ({
  pool: 'hz',
  name,
  specifications: { instanceType: 'cpx31', providerImage: 'debian-12', location: 'nbg1', cpuCount: 4 },
  agent: { ...agent, workerName: name },
  userData: cloudInitUserData({ ...agent, workerName: name }),
});

async function failure(promise: Promise<unknown>): Promise<ProviderError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  const e = err as ProviderError;
  expect(`${e.message} ${e.providerCode} ${e.stack}`).not.toContain(TOKEN);
  return e;
}

describe('hetzner provider against the stand-in', () => {
  it('creates a labelled server with the user data, lists it, deletes it, and deletes it again', async () => {
    const p = provider();
    const { id } = await p.launch(spec(), providerCall(account));
    const create = api.requests.find((r) => r.method === 'POST')!;
    expect(create.authorization).toBe(`Bearer ${TOKEN}`);
    expect(create.body).toEqual({
      name: 'hz-0001',
      server_type: 'cpx31',
      image: 'debian-12',
      location: 'nbg1',
      user_data: spec().userData,
      labels: { [HETZNER_LABELS.pool]: 'hz', [HETZNER_LABELS.instance]: 'hz-0001' },
      start_after_create: true,
    });
    api.seed({ name: 'other-0001', labels: { [HETZNER_LABELS.pool]: 'other' } });

    expect(await p.list('hz', providerCall(account))).toEqual([
      { id, name: 'hz-0001', state: 'starting', createdAt: expect.any(Date) },
    ]);
    api.servers.get(Number(id))!.status = 'running';
    expect((await p.list('hz', providerCall(account)))[0]!.state).toBe('running');

    await p.terminate(id, providerCall(account));
    expect(api.servers.has(Number(id))).toBe(false);
    expect(api.servers.size).toBe(1);
    await p.terminate(id, providerCall(account));
    expect(await p.list('hz', providerCall(account))).toEqual([]);
    expect(log.text()).not.toContain(TOKEN);
    expect(log.text()).not.toContain('tsk_activation_hz1');
  });

  it('follows the pages of a long list', async () => {
    for (let i = 0; i < 120; i++)
      api.seed({
        name: `hz-${i}`,
        status: 'running',
        labels: { [HETZNER_LABELS.pool]: i % 2 ? 'hz' : 'other', [HETZNER_LABELS.instance]: `hz-${i}` },
      });
    const listed = await provider().list('hz', providerCall(account));
    expect(listed).toHaveLength(60);
    expect(new Set(listed.map((i) => i.name)).size).toBe(60);
    expect(api.requests.map((r) => new URL(r.path, 'http://x').searchParams.get('page'))).toEqual(['1', '2']);
  });

  it('finds the server of a launch whose answer was lost, and refuses a name taken by another pool', async () => {
    const lost = api.seed({
      name: 'hz-0007',
      labels: { [HETZNER_LABELS.pool]: 'hz', [HETZNER_LABELS.instance]: 'hz-0007' },
    });
    expect(await provider().launch(spec('hz-0007'), providerCall(account))).toEqual({ id: String(lost.id) });
    api.seed({ name: 'hz-0008', labels: { [HETZNER_LABELS.pool]: 'other' } });
    const err = await failure(provider().launch(spec('hz-0008'), providerCall(account)));
    expect([err.kind, err.providerCode]).toEqual(['invalid', 'uniqueness_error']);
  });

  it('says auth for a wrong token and for an account without one', async () => {
    const wrong = await failure(provider().list('hz', providerCall({ token: 'not-the-right-token' })));
    expect([wrong.kind, wrong.providerCode]).toEqual(['auth', 'unauthorized']);
    expect(wrong.message).toContain('unable to authenticate');
    const none = await failure(provider().list('hz', providerCall(null)));
    expect([none.kind, none.providerCode]).toEqual(['auth', 'no_token']);
  });

  it('says quota when the project is at its server limit', async () => {
    api.maxServers = 1;
    await provider().launch(spec('hz-0001'), providerCall(account));
    const err = await failure(provider().launch(spec('hz-0002'), providerCall(account)));
    expect([err.kind, err.providerCode, err.retryable]).toEqual(['quota', 'resource_limit_exceeded', true]);
  });

  it.each([
    [403, 'resource_unavailable', 'capacity'],
    [412, 'placement_error', 'capacity'],
    [429, 'rate_limit_exceeded', 'unavailable'],
    [503, 'maintenance', 'unavailable'],
    [403, 'forbidden', 'auth'],
    [400, 'invalid_input', 'invalid'],
    [502, 'something_new', 'unavailable'],
    [418, 'something_else', 'invalid'],
  ])('maps HTTP %i %s to %s', async (status, code, kind) => {
    api.failNext(status, code, `the cloud says ${code}`);
    const err = await failure(provider().launch(spec(), providerCall(account)));
    expect([err.kind, err.providerCode]).toEqual([kind, code]);
    expect(err.message).toContain(`the cloud says ${code}`);
  });

  it('blanks the token from an error message that quotes it', async () => {
    api.failNext(401, 'unauthorized', `token ${TOKEN} is revoked`);
    const err = await failure(provider().list('hz', providerCall(account)));
    expect(err.message).toContain('token [redacted] is revoked');
    expect(log.text()).toContain('[redacted]');
    expect(log.text()).not.toContain(TOKEN);
  });

  it('times out on an API that does not answer', async () => {
    api.hang = true;
    const err = await failure(provider().launch(spec(), providerCall(account, 300)));
    expect([err.kind, err.providerCode, err.retryable]).toEqual(['timeout', 'timeout', true]);
  });

  it('says unavailable for an API that cannot be reached', async () => {
    const err = await failure(provider('http://127.0.0.1:1/v1').list('hz', providerCall(account)));
    expect([err.kind, err.providerCode]).toEqual(['unavailable', 'network']);
  });

  it.each([
    ['an HTML page', '<html>502 Bad Gateway</html>', 'body'],
    ['JSON of the wrong shape', '{"servers": "none"}', 'servers'],
  ])('refuses %s as answer', async (_what, body, where) => {
    api.garbageNext(body);
    const err = await failure(provider().list('hz', providerCall(account)));
    expect([err.kind, err.providerCode]).toEqual(['unavailable', 'malformed_answer']);
    expect(err.message).toContain(where);
  });

  it('refuses to launch an instance name Hetzner cannot take, before any request', async () => {
    const err = await failure(provider().launch(spec('hz_0001'), providerCall(account)));
    expect([err.kind, err.providerCode]).toEqual(['invalid', 'invalid_specifications']);
    expect(api.requests).toEqual([]);
  });
});

describe('hetzner pool validation', () => {
  it('accepts a complete pool', () => {
    expect(
      validateHetznerPool({
        name: 'hz-arm',
        specifications: { instanceType: 'cax21', providerImage: '114690387' },
        account,
      }),
    ).toEqual([]);
    expect(
      validateHetznerPool({
        name: 'hz-arm',
        specifications: { instanceType: 'cax21', providerImage: 'debian-12', location: 'hel1' },
      }),
    ).toEqual([]);
  });

  it('names every problem, and never the token', () => {
    const problems = validateHetznerPool({
      name: 'hz_pool+1',
      specifications: {
        providerImage: 'Debian 12!',
        location: 'Falkenstein',
        subnetId: 'subnet-0abc',
        command: ['/bin/true'],
      },
      account: { token: 'has spaces ' + TOKEN, project: 'x' },
    });
    expect(problems.map((p) => p.path)).toEqual([
      'input.name',
      'input.specifications.instanceType',
      'input.specifications.providerImage',
      'input.specifications.location',
      'input.specifications.command',
      'input.specifications.subnetId',
      'input.providerAccount.token',
      'input.providerAccount.project',
    ]);
    expect(problems.find((p) => p.path === 'input.specifications.instanceType')!.message).toContain('cx22');
    expect(problems.find((p) => p.path === 'input.specifications.subnetId')!.message).toContain('ec2 pools');
    expect(JSON.stringify(problems)).not.toContain(TOKEN);
    expect(
      validateHetznerPool({
        name: 'hz',
        specifications: { instanceType: 'cx22', providerImage: 'debian-12' },
        account: null,
      }).map((p) => p.path),
    ).toEqual(['input.providerAccount']);
  });
});

describe('hetzner offerings: server types and locations in order', () => {
  const offerings = [
    { instanceType: 'cpx31', location: 'nbg1' },
    { instanceType: 'cpx31', location: 'fsn1' },
    { instanceType: 'cx42', location: 'hel1' },
  ];
  const fallbackSpec = (name = 'hz-0101'): LaunchSpec => {
    const s = spec(name);
    const specifications = {
      providerImage: 'debian-12',
      offerings: offerings.map((o) => ({ ...o, market: 'on-demand' })),
    };
    return { ...s, specifications, offerings: offeringsOf(specifications) };
  };
  beforeEach(() => api.unavailable.clear());

  it('tries the next offering when the stand-in has no room for one, in the same launch', async () => {
    api.unavailable.add('cpx31@nbg1');
    api.unavailable.add('cpx31@fsn1');
    const result = await provider().launch(fallbackSpec(), providerCall(account));
    const posts = api.requests.filter((r) => r.method === 'POST' && r.path === '/v1/servers');
    expect(
      posts.map((r) => [(r.body as { server_type: string }).server_type, (r.body as { location: string }).location]),
    ).toEqual([
      ['cpx31', 'nbg1'],
      ['cpx31', 'fsn1'],
      ['cx42', 'hel1'],
    ]);
    expect(result.offering).toBe('on-demand:cx42@hel1');
    expect(result.unavailable).toEqual([
      {
        key: 'on-demand:cpx31@nbg1',
        kind: 'capacity',
        code: 'resource_unavailable',
        reason: expect.stringContaining('unavailable in location nbg1'),
      },
      {
        key: 'on-demand:cpx31@fsn1',
        kind: 'capacity',
        code: 'resource_unavailable',
        reason: expect.stringContaining('unavailable in location fsn1'),
      },
    ]);
    expect(api.servers.get(Number(result.id))).toMatchObject({
      server_type: { name: 'cx42' },
      datacenter: { location: { name: 'hel1' } },
    });
    expect(log.text()).not.toContain(TOKEN);
  });

  it('fails naming every offering when none has room', async () => {
    for (const o of offerings) api.unavailable.add(`${o.instanceType}@${o.location}`);
    const e = await failure(provider().launch(fallbackSpec(), providerCall(account)));
    expect([e.kind, e.providerCode]).toEqual(['capacity', 'resource_unavailable']);
    expect(e.offeringFailures.map((f) => f.key)).toEqual([
      'on-demand:cpx31@nbg1',
      'on-demand:cpx31@fsn1',
      'on-demand:cx42@hel1',
    ]);
    for (const words of ['cpx31 in nbg1 (on-demand)', 'cpx31 in fsn1 (on-demand)', 'cx42 in hel1 (on-demand)'])
      expect(e.message).toContain(words);
    expect(api.servers.size).toBe(0);
  });

  it('stops at an error another offering will not cure (auth), trying no other', async () => {
    const before = api.requests.length;
    const e = await failure(provider().launch(fallbackSpec(), providerCall({ token: 'wrong-token-value' })));
    expect(e.kind).toBe('auth');
    expect(e.offeringFailures).toEqual([]);
    expect(api.requests.length - before).toBe(1);
  });

  it('refuses spot offerings with their path', () => {
    const problems = validateHetznerPool({
      name: 'hz',
      specifications: {
        providerImage: 'debian-12',
        offerings: [
          { instanceType: 'cpx31', market: 'on-demand' },
          { instanceType: 'cx42', location: 'hel1', market: 'spot' },
        ],
      },
      account,
    });
    expect(problems).toEqual([
      expect.objectContaining({
        path: 'input.specifications.offerings[1].market',
        message: expect.stringContaining('no spot market'),
      }),
    ]);
  });
});
