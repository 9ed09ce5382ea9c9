/**
 * Worker images through the API (docs/design.md: pools and instances and images): registering a manifest, the typed refusals of a
 * bad one (nothing written), and a pool that names an image taking its template tags from it, which
 * demand and diagnosis then use.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  ERROR_FIELDS,
  createUser,
  createWorkspace,
  expectResult,
  ok,
  snapshot,
  submitOk,
} from '../helpers/fixtures.js';
import { imageManifest } from '../helpers/image-manifest.js';

const t = useTestApp({ providers: { execCommands: ['/bin/true'] } });

const IMAGE_FIELDS = `name recipe { suite architecture mirror source enableBackends enableTasks } packageCount packages { name version }
  tags { tag source condition } rootfs { path bytes sha256 } diskImage { path } createdAt registeredAt`;
const REGISTER = `mutation($m: JSON!) { registerWorkerImage(input: { manifest: $m }) { __typename ... on WorkerImage { ${IMAGE_FIELDS} } ${ERROR_FIELDS} } }`;
const POOL = `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename
  ... on WorkerPool { name specifications { image enableTasks } templateProvidedTags { tag provenance source } } ${ERROR_FIELDS} } }`;

const SBUILD_IMAGE = imageManifest('trixie-sbuild');
const SBUILD_TAGS = [
  'worker:build-arch:amd64',
  'worker:executor:unshare',
  'worker:cap:sbuild',
  'worker:cap:mmdebstrap',
  'worker:task:worker:noop:version:1',
  'worker:task:worker:sbuild:version:1',
];

let userToken: string;
beforeAll(async () => {
  userToken = await createUser(t, 'someone');
});

describe('registerWorkerImage', () => {
  it('registers a manifest, and shows it by name and in the list', async () => {
    const image = await expectResult(t, 'WorkerImage', REGISTER, { m: SBUILD_IMAGE });
    expect(image).toMatchObject({
      name: 'trixie-sbuild',
      recipe: {
        suite: 'trixie',
        architecture: 'amd64',
        mirror: null,
        source: null,
        enableBackends: ['unshare'],
        enableTasks: ['sbuild'],
      },
      packageCount: SBUILD_IMAGE.packages.length,
      rootfs: { path: 'trixie-sbuild.tar', bytes: 379_584_512, sha256: 'a'.repeat(64) },
      diskImage: null,
      createdAt: '2026-11-23T04:00:00.000Z',
    });
    expect(image.packageCount).toBeGreaterThan(5);
    expect(image.tags.map((x: { tag: string }) => x.tag)).toEqual(SBUILD_TAGS);
    expect(image.tags[2]).toEqual({ tag: 'worker:cap:sbuild', source: 'package:sbuild', condition: null });

    const listed = await ok(
      t,
      `{ workerImages { name packageCount } workerImage(name: "trixie-sbuild") { name tags { tag } } missing: workerImage(name: "nope") { name } }`,
    );
    expect(listed.workerImages).toEqual([{ name: 'trixie-sbuild', packageCount: image.packageCount }]);
    expect(listed.workerImage.tags.map((x: { tag: string }) => x.tag)).toEqual(SBUILD_TAGS);
    expect(listed.missing).toBeNull();
  });

  it('keeps a registered image unchanged: the same name again is refused', async () => {
    const before = await snapshot(t, ['worker_image']);
    const again = await expectResult(t, 'AlreadyExistsError', REGISTER, {
      m: { ...imageManifest('trixie-sbuild', { enable_tasks: ['autopkgtest'] }) },
    });
    expect(again.message).toMatch(/"trixie-sbuild" is already registered.*new name/);
    expect(await snapshot(t, ['worker_image'])).toEqual(before);
  });

  const bad = (change: (m: Record<string, any>) => unknown) =>
    change(structuredClone(imageManifest('bad-image')) as Record<string, any>);
  it.each<[string, unknown, { code: string; path: string; message?: RegExp }]>([
    [
      'a field missing',
      bad((m) => ({ ...m, recipe: { ...m.recipe, suite: undefined } })),
      { code: 'INVALID_INPUT', path: 'input.manifest.recipe.suite' },
    ],
    ['another format', bad((m) => ({ ...m, format: 2 })), { code: 'INVALID_INPUT', path: 'input.manifest.format' }],
    [
      'a name that is not a name',
      bad((m) => ({ ...m, name: '../etc' })),
      { code: 'INVALID_INPUT', path: 'input.manifest.name' },
    ],
    [
      'a build time that is not one',
      bad((m) => ({ ...m, createdAt: 'yesterday' })),
      { code: 'INVALID_INPUT', path: 'input.manifest.createdAt' },
    ],
    [
      'a package that is not one',
      bad((m) => ({ ...m, packages: [...m.packages, { name: 'x' }] })),
      { code: 'INVALID_INPUT', path: `input.manifest.packages[${imageManifest('x').packages.length}].version` },
    ],
    [
      'a tag no admin may provide',
      bad((m) => ({ ...m, tags: [{ tag: 'worker:type:server', source: 'recipe' }, ...m.tags] })),
      { code: 'TAG_NOT_ALLOWED', path: 'input.manifest.tags[0].tag' },
    ],
    [
      'a tag that is not a tag',
      bad((m) => ({ ...m, tags: [...m.tags, { tag: 'not a tag', source: 'x' }] })),
      { code: 'INVALID_TAG', path: `input.manifest.tags[${SBUILD_TAGS.length}].tag` },
    ],
    ['not an object', 'trixie-sbuild.manifest.json', { code: 'INVALID_INPUT', path: 'input.manifest' }],
    [
      'a mirror with a user and password',
      bad((m) => ({ ...m, recipe: { ...m.recipe, mirror: 'https://user:secret@mirror.example.org/debian' } })),
      {
        code: 'INVALID_INPUT',
        path: 'input.manifest.recipe.mirror',
        message: /user name or password.*apt auth\.conf file.*--apt-auth FILE/,
      },
    ],
    [
      'a source URI with a user and password',
      bad((m) => ({
        ...m,
        recipe: {
          ...m.recipe,
          source: 'Types: deb\nURIs: https://user:secret@apt.example.org/debian\nSuites: trixie\nComponents: main\n',
        },
      })),
      { code: 'INVALID_INPUT', path: 'input.manifest.recipe.source', message: /user name or password/ },
    ],
    [
      'a NUL in a package version',
      bad((m) => ({ ...m, packages: [{ ...m.packages[0], version: '1\u0000' }] })),
      { code: 'INVALID_INPUT', path: 'input.manifest.packages[0].version' },
    ],
  ])('refuses a manifest with %s, naming the field, and writes nothing', async (_label, manifest, expected) => {
    const before = await snapshot(t);
    const refused = await expectResult(t, 'InputError', REGISTER, { m: manifest });
    expect(refused).toMatchObject({ code: expected.code, path: expected.path });
    expect(refused.message).toContain(expected.path);
    if (expected.message) expect(refused.message).toMatch(expected.message);
    expect(refused.message).not.toContain('secret');
    expect(await snapshot(t)).toEqual(before);
  });

  it('shows the registered images to anyone, like pools (their template tags are the same); a bad token is refused', async () => {
    const anonymous = await ok(t, `{ workerImages { name tags { tag } } }`, {}, null);
    expect(anonymous.workerImages.map((i: { name: string }) => i.name)).toEqual(['trixie-sbuild']);
    expect(
      (await ok(t, `{ workerImage(name: "trixie-sbuild") { packageCount } }`, {}, userToken)).workerImage.packageCount,
    ).toBe(SBUILD_IMAGE.packages.length);
    const bad = await t.gql(`{ workerImages { name } }`, {}, 'tsk_user_not-a-token-0000000000');
    expect(bad.status).toBeLessThan(500);
    expect(bad.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it.each<[string, () => string | null, string]>([
    ['anonymous', () => null, 'UnauthenticatedError'],
    ['a user who is not an admin', () => userToken, 'ForbiddenError'],
    ['a revoked-looking token', () => 'tsk_user_not-a-token-0000000000', 'UnauthenticatedError'],
  ])('refuses %s, and writes nothing', async (_label, token, typename) => {
    const before = await snapshot(t);
    const res = await t.gql(REGISTER, { m: imageManifest('theirs') }, token());
    if (res.data) expect(res.data.registerWorkerImage.__typename).toBe(typename);
    else expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(res.status).toBeLessThan(500);
    expect(await snapshot(t)).toEqual(before);
  });
});

describe('a pool that names an image', () => {
  it('refuses an image that is not registered, naming specifications.image, and writes nothing', async () => {
    const before = await snapshot(t);
    const refused = await expectResult(t, 'InputError', POOL, {
      i: { name: 'p-unknown', providerType: 'local', specifications: { image: 'never-built' } },
    });
    expect(refused).toMatchObject({ code: 'UNKNOWN_IMAGE', path: 'input.specifications.image' });
    expect(refused.message).toMatch(/no worker image "never-built" is registered/);
    expect(await snapshot(t)).toEqual(before);
  });

  it('refuses the lists the image gives beside it', async () => {
    const refused = await expectResult(t, 'InputError', POOL, {
      i: {
        name: 'p-both',
        providerType: 'local',
        specifications: { image: 'trixie-sbuild', enableTasks: ['autopkgtest'] },
      },
    });
    expect(refused).toMatchObject({ code: 'INVALID_INPUT', path: 'input.specifications.enableTasks' });
  });

  it('takes its template tags from the image, which demand and diagnosis use', async () => {
    const pool = await expectResult(t, 'WorkerPool', POOL, {
      i: {
        name: 'sbuilders',
        providerType: 'exec',
        specifications: { image: 'trixie-sbuild', command: ['/bin/true'] },
      },
    });
    expect(pool.templateProvidedTags).toEqual([
      { tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'pool-template' },
      ...SBUILD_TAGS.map((tag) => ({ tag, provenance: 'ADMIN', source: 'image:trixie-sbuild' })),
    ]);

    // An sbuild request no static worker can run: the pool's image makes it runnable there.
    await createWorkspace(t, 'debian/images');
    const wr = await submitOk(t, {
      workspace: 'debian/images',
      taskType: 'worker',
      taskName: 'sbuild',
      taskData: { source_package: 'hello', host_architecture: 'amd64' },
    });
    const diag = await ok(t, `query($id: ID!) { workRequest(id: $id) { diagnosis { state matchingPools } } }`, {
      id: wr.id,
    });
    expect(diag.workRequest.diagnosis).toEqual({ state: 'WAITING_FOR_PROVISIONING', matchingPools: ['sbuilders'] });
    const demand = await ok(t, `{ provisioningDemand { pools { pool { name } pendingRunnable launch } } }`);
    expect(demand.provisioningDemand.pools).toEqual([{ pool: { name: 'sbuilders' }, pendingRunnable: 1, launch: 1 }]);
  });

  it('gets no image tags for an arm64 request', async () => {
    const wr = await submitOk(t, {
      workspace: 'debian/images',
      taskType: 'worker',
      taskName: 'sbuild',
      taskData: { source_package: 'hello', host_architecture: 'arm64' },
    });
    const diag = await ok(t, `query($id: ID!) { workRequest(id: $id) { diagnosis { state matchingPools } } }`, {
      id: wr.id,
    });
    expect(diag.workRequest.diagnosis).toEqual({ state: 'UNSCHEDULABLE', matchingPools: [] });
  });
});

describe('credentials in a recipe', () => {
  it('are never shown: an image registered before they were refused is shown without them, to anyone', async () => {
    // As an earlier server stored it, when registration did not refuse them yet.
    const m = imageManifest('with-credentials');
    const manifest = {
      ...m,
      recipe: {
        ...m.recipe,
        mirror: 'https://user:secret@mirror.example.org/debian',
        source:
          'Types: deb\nURIs: https://token-secret@apt.example.org/debian http://deb.debian.org/debian\nSuites: trixie\nComponents: main\n',
      },
    };
    await t.sql(`insert into worker_image (name, manifest, registered_at) values ('with-credentials', ?, now())`, [
      JSON.stringify(manifest),
    ]);
    for (const token of [null, userToken, t.adminToken]) {
      const res = await t.gql(
        `{ workerImage(name: "with-credentials") { recipe { mirror source } } workerImages { name recipe { mirror source } } }`,
        {},
        token,
      );
      expect(res.errors).toBeUndefined();
      expect(res.data!.workerImage.recipe).toEqual({
        mirror: 'https://mirror.example.org/debian',
        source:
          'Types: deb\nURIs: https://apt.example.org/debian http://deb.debian.org/debian\nSuites: trixie\nComponents: main\n',
      });
      expect(JSON.stringify(res)).not.toContain('secret');
    }
  });
});
