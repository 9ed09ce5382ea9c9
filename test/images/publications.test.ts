/**
 * Publications of worker images through the real app: an admin records where an image is published
 * (what `tagsched-image publish` does last), the image lists it, a hetzner or ec2 pool that names the
 * image and no providerImage is refused until its provider and region have a publication, and its
 * launches (the provisioner's cycle against the cloud stand-ins) boot the published id.
 */
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { useCloudTestApp } from '../provisioner/stand-ins/clouds.js';
import { createWorkspace, ERROR_FIELDS, ok, sbuild, submitOk } from '../helpers/fixtures.js';
import { imageManifest } from '../helpers/image-manifest.js';
import { resetScheduling } from '../helpers/scheduler-fixtures.js';

const HZ_TOKEN = 'hz-token-publications-7Qm2';
const KEY_ID = 'AKIAZ7TAGSCHEDPUB001';
const SECRET = 'publications-secret-access-key-0001';
const AMI = 'ami-0123456789abcdef0';
const { clouds, t } = useCloudTestApp({
  hetznerToken: HZ_TOKEN,
  keyId: KEY_ID,
  secretAccessKey: SECRET,
  images: [AMI],
});

const IMAGE_FIELDS = `name publications { provider region providerImageId publishedAt }`;
const RECORD = `mutation($i: RecordWorkerImagePublicationInput!) { recordWorkerImagePublication(input: $i) { __typename ... on WorkerImage { ${IMAGE_FIELDS} } ${ERROR_FIELDS} ... on InputError { problems { message path } } } }`;
const CREATE_POOL = `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on WorkerPool { name } ${ERROR_FIELDS} ... on InputError { problems { message path } } } }`;
const record = async (input: Record<string, string>, token?: string | null) =>
  (await ok(t, RECORD, { i: input }, token)).recordWorkerImagePublication;
const createPool = async (input: Record<string, unknown>) => (await ok(t, CREATE_POOL, { i: input })).createWorkerPool;
const hetznerPool = (name: string, specifications: Record<string, unknown> = {}) =>
  createPool({
    name,
    providerType: 'hetzner',
    providerAccount: { token: HZ_TOKEN },
    specifications: { instanceType: 'cx22', location: 'nbg1', image: 'pub-trixie', ...specifications },
  });
const ec2Pool = (name: string, region = 'eu-central-1') =>
  createPool({
    name,
    providerType: 'ec2',
    providerAccount: { accessKeyId: KEY_ID, secretAccessKey: SECRET, region },
    specifications: { instanceType: 't3.micro', image: 'pub-trixie' },
  });

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  const manifest = imageManifest('pub-trixie', { enable_backends: ['unshare'], enable_tasks: ['sbuild'] });
  manifest.files.diskImage = { path: 'pub-trixie.raw', bytes: 2 ** 30, sha256: 'c'.repeat(64) };
  manifest.boot = {
    format: 'raw',
    diskBytes: 2 ** 30,
    kernel: '6.12.48+deb13-amd64',
    bootModes: ['bios', 'uefi'],
    partitions: [],
    rootUuid: 'r',
    cloudInitDatasources: ['Ec2', 'Hetzner'],
  };
  // An image without a bootable disk has nothing to publish.
  const flat = await ok(t, `mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename } }`, {
    m: imageManifest('pub-flat'),
  });
  expect(flat.registerWorkerImage.__typename).toBe('WorkerImage');
  const registered = await ok(
    t,
    `mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename ${ERROR_FIELDS} } }`,
    { m: manifest },
  );
  expect(registered.registerWorkerImage.__typename).toBe('WorkerImage');
});
beforeEach(() => resetScheduling(t));

describe('publications of a worker image', () => {
  it('are recorded by an admin only, checked, listed on the image, and replaced per provider and region', async () => {
    expect(
      (await record({ image: 'pub-trixie', provider: 'ec2', region: 'eu-central-1', providerImageId: AMI }, null)).code,
    ).toBe('UNAUTHENTICATED');
    const refused = await record({ image: 'pub-trixie', provider: 'ec2', region: 'global', providerImageId: '123' });
    expect(refused.__typename).toBe('InputError');
    expect(refused.problems.map((p: { path: string }) => p.path).sort()).toEqual([
      'input.providerImageId',
      'input.region',
    ]);
    expect(
      (await record({ image: 'pub-trixie', provider: 'hetzner', region: 'eu-central-1', providerImageId: '4242' }))
        .problems[0].message,
    ).toContain('global');
    expect(
      (await record({ image: 'pub-nothing', provider: 'hetzner', region: 'global', providerImageId: '4242' })).code,
    ).toBe('NOT_FOUND');
    expect(
      (await record({ image: 'pub-trixie', provider: 'gcp', region: 'global', providerImageId: '4242' })).__typename,
    ).toBe('InputError');
    expect(
      (await record({ image: 'pub-flat', provider: 'hetzner', region: 'global', providerImageId: '4242' })).problems[0]
        .message,
    ).toContain('has no bootable disk image');

    await record({
      image: 'pub-trixie',
      provider: 'ec2',
      region: 'us-east-1',
      providerImageId: 'ami-0000000000000000a',
    });
    const image = await record({
      image: 'pub-trixie',
      provider: 'ec2',
      region: 'us-east-1',
      providerImageId: 'ami-0000000000000000b',
    });
    expect(image.publications).toEqual([
      {
        provider: 'ec2',
        region: 'us-east-1',
        providerImageId: 'ami-0000000000000000b',
        publishedAt: expect.any(String),
      },
    ]);
  });

  it('refuse a hetzner or ec2 pool naming an unpublished image with that reason, and let its launches boot the published id', async () => {
    const hz = await hetznerPool('pub-hz');
    expect(hz.__typename).toBe('InputError');
    expect(hz.problems).toEqual([
      {
        path: 'input.specifications.image',
        message: expect.stringContaining('the worker image "pub-trixie" is not published to hetzner in global'),
      },
    ]);
    const other = await ec2Pool('pub-ec2-west', 'eu-west-1');
    expect(other.problems[0].message).toContain('is not published to ec2 in eu-west-1');
    // A pool that gives its providerImage by hand needs no publication.
    expect((await hetznerPool('pub-hz-hand', { providerImage: 'debian-12' })).__typename).toBe('WorkerPool');

    await record({ image: 'pub-trixie', provider: 'hetzner', region: 'global', providerImageId: '31337' });
    await record({ image: 'pub-trixie', provider: 'ec2', region: 'eu-central-1', providerImageId: AMI });
    expect((await hetznerPool('pub-hz', { providerImage: null })).__typename).toBe('WorkerPool');
    expect((await ec2Pool('pub-ec2')).__typename).toBe('WorkerPool');
    // us-east-1 was published in the test above; eu-west-1 still is not.
    expect(await ec2Pool('pub-ec2-east', 'us-east-1')).toEqual({ __typename: 'WorkerPool', name: 'pub-ec2-east' });
    expect((await ec2Pool('pub-ec2-west', 'eu-west-1')).__typename).toBe('InputError');
    // Moving a pool's account to a region the image is not published to is refused the same way.
    const moved = await ok(
      t,
      `mutation($a: JSON) { updateWorkerPool(input: { name: "pub-ec2-east", providerAccount: $a }) { __typename ... on InputError { problems { message path } } } }`,
      { a: { accessKeyId: KEY_ID, secretAccessKey: SECRET, region: 'ap-south-1' } },
    );
    expect(moved.updateWorkerPool.problems).toEqual([
      { path: 'input.specifications.image', message: expect.stringContaining('is not published to ec2 in ap-south-1') },
    ]);
    expect(JSON.stringify(moved)).not.toContain(SECRET);
    await ok(t, `mutation { updateWorkerPool(input: { name: "pub-ec2-east", enabled: false }) { __typename } }`);
    await ok(t, `mutation { updateWorkerPool(input: { name: "pub-hz-hand", enabled: false }) { __typename } }`);

    // Work only the image's pools can run: the provisioner launches it on the hetzner pool, then (that
    // pool disabled) the next on the ec2 pool, each booting the id published for its provider and region.
    const setEnabled = (name: string, enabled: boolean) =>
      ok(
        t,
        `mutation($n: String!, $e: Boolean) { updateWorkerPool(input: { name: $n, enabled: $e }) { __typename } }`,
        { n: name, e: enabled },
      );
    await setEnabled('pub-ec2', false);
    await submitOk(t, sbuild('debian/main'));
    expect(await t.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1, launchFailures: 0 });
    const created = clouds.hetzner.requests.filter((r) => r.method === 'POST' && r.path === '/v1/servers');
    expect(created).toHaveLength(1);
    expect(created[0]!.body).toMatchObject({ image: '31337', server_type: 'cx22', location: 'nbg1' });

    await setEnabled('pub-hz', false);
    await setEnabled('pub-ec2', true);
    await submitOk(t, sbuild('debian/main', 'dpkg'));
    // (the disabled hetzner pool's instance no longer counts: both requests may get an ec2 instance)
    const second = (await t.app.provisioner.runCycle({ reconcile: false }))!;
    expect(second).toMatchObject({ launchFailures: 0 });
    const run = clouds.ec2.requests.filter((r) => r.action === 'RunInstances');
    expect(run.length).toBeGreaterThanOrEqual(1);
    expect(run).toHaveLength(second.launched);
    for (const r of run) expect(r.params).toMatchObject({ ImageId: AMI, InstanceType: 't3.micro' });
    // The pools keep naming the image, not an id: a new publication is what their next launches boot.
    const specs = await t.sql<{ specifications: Record<string, unknown> }>(
      `select specifications from worker_pool where name in ('pub-hz', 'pub-ec2')`,
    );
    for (const { specifications } of specs) expect(specifications.providerImage).toBeUndefined();
  });
});
