import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { expectResult, ok, snapshot } from '../helpers/fixtures.js';

// Pools are checked by their provider when they are created or changed (src/providers/registry.ts):
// every problem at once, each with its path, nothing written, no secret in the answer.
const EXEC_COMMAND = '/usr/local/bin/cloud-provider';
const t = useTestApp({ providers: { execCommands: [EXEC_COMMAND] } });

const TOKEN = 'hcloud-token-must-not-come-back-4711';
const AWS_SECRET = 'aws-secret-access-key-must-not-come-back';

const MUTATION = (field: 'createWorkerPool' | 'updateWorkerPool') =>
  `mutation($i: WorkerPoolInput!) { ${field}(input: $i) { __typename
     ... on WorkerPool { name providerType hasProviderAccount specifications { instanceType providerImage location subnetId securityGroupIds command } }
     ... on InputError { code message path problems { code message path } } ... on Error { code message } } }`;

async function refused(field: 'createWorkerPool' | 'updateWorkerPool', input: Record<string, unknown>) {
  const before = await snapshot(t, ['worker_pool']);
  const r = await ok(t, MUTATION(field), { i: input });
  const result = r[field] as {
    __typename: string;
    code: string;
    message: string;
    path: string;
    problems: { path: string; message: string }[];
  };
  expect(result.__typename).toBe('InputError');
  expect(JSON.stringify(r)).not.toContain(TOKEN);
  expect(JSON.stringify(r)).not.toContain(AWS_SECRET);
  expect(await snapshot(t, ['worker_pool'])).toEqual(before);
  return result;
}

describe('provider checks at pool create and update', () => {
  it('creates exec, hetzner and ec2 pools whose specifications and accounts their provider accepts', async () => {
    const exec = await expectResult(t, 'WorkerPool', MUTATION('createWorkerPool'), {
      i: {
        name: 'ex',
        providerType: 'exec',
        specifications: { command: [EXEC_COMMAND, '--zone', 'b'] },
        providerAccount: { anything: 'goes' },
      },
    });
    expect(exec.specifications).toMatchObject({ command: [EXEC_COMMAND, '--zone', 'b'], instanceType: null });
    await expectResult(t, 'WorkerPool', MUTATION('createWorkerPool'), {
      i: {
        name: 'hz',
        providerType: 'hetzner',
        specifications: { instanceType: 'cpx31', providerImage: 'debian-12', location: 'fsn1' },
        providerAccount: { token: TOKEN },
      },
    });
    const ec2 = await expectResult(t, 'WorkerPool', MUTATION('createWorkerPool'), {
      i: {
        name: 'aws',
        providerType: 'ec2',
        specifications: {
          instanceType: 'c6i.large',
          providerImage: 'ami-0abcdef1234567890',
          subnetId: 'subnet-01234567',
          securityGroupIds: ['sg-01234567'],
        },
        providerAccount: { accessKeyId: 'AKIAZ7TAGSCHEDTEST01', secretAccessKey: AWS_SECRET, region: 'eu-central-1' },
      },
    });
    expect(ec2.hasProviderAccount).toBe(true);
    expect(JSON.stringify(ec2)).not.toContain(AWS_SECRET);
  });

  it('refuses an exec pool whose command the server does not allow', async () => {
    const r = await refused('createWorkerPool', {
      name: 'ex-bad',
      providerType: 'exec',
      specifications: { command: ['/bin/sh', '-c', 'curl evil'] },
    });
    expect(r.path).toBe('input.specifications.command[0]');
    expect(r.message).toContain(EXEC_COMMAND);
  });

  it('names every problem of a hetzner pool, and never its token', async () => {
    const r = await refused('createWorkerPool', {
      name: 'hz_bad',
      providerType: 'hetzner',
      specifications: { providerImage: 'Debian 12', subnetId: 'subnet-01234567' },
      providerAccount: { token: `with space ${TOKEN}`, user: 'me' },
    });
    expect(r.problems.map((p) => p.path)).toEqual([
      'input.name',
      'input.specifications.instanceType',
      'input.specifications.providerImage',
      'input.specifications.subnetId',
      'input.providerAccount.token',
      'input.providerAccount.user',
    ]);
  });

  it('asks a cloud pool for an account', async () => {
    const r = await refused('createWorkerPool', {
      name: 'aws-none',
      providerType: 'ec2',
      specifications: { instanceType: 'c6i.large', providerImage: 'ami-0abcdef1234567890' },
    });
    expect(r.problems.map((p) => p.path)).toEqual(['input.providerAccount']);
  });

  it('checks a change of specifications without asking for the account again', async () => {
    const pool = await expectResult(t, 'WorkerPool', MUTATION('updateWorkerPool'), {
      i: { name: 'hz', specifications: { instanceType: 'cax21', providerImage: '114690387' } },
    });
    expect(pool.specifications).toMatchObject({ instanceType: 'cax21', providerImage: '114690387', location: null });
    const r = await refused('updateWorkerPool', {
      name: 'hz',
      specifications: { instanceType: 'CAX 21', providerImage: 'debian-12' },
    });
    expect(r.problems.map((p) => p.path)).toEqual(['input.specifications.instanceType']);
  });

  it("checks the stored account against a new provider type, and a new account against the pool's", async () => {
    // The hetzner token is no ec2 account, and the hetzner specifications are no ec2 specifications.
    const r = await refused('updateWorkerPool', { name: 'hz', providerType: 'ec2' });
    expect(r.problems.map((p) => p.path)).toEqual([
      'input.specifications.instanceType',
      'input.specifications.providerImage',
      'input.providerAccount.accessKeyId',
      'input.providerAccount.secretAccessKey',
      'input.providerAccount.region',
      'input.providerAccount.token',
    ]);
    const wrongKeys = await refused('updateWorkerPool', {
      name: 'aws',
      providerAccount: { accessKeyId: 'AKIAZ7TAGSCHEDTEST01', secretAccessKey: AWS_SECRET },
    });
    expect(wrongKeys.problems.map((p) => p.path)).toEqual(['input.providerAccount.region']);
  });
});
