import { beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../src/services/identity/secrets.js';
import { useTestApp } from '../helpers/app.js';
import {
  ERROR_FIELDS,
  createPool,
  createUser,
  createWorkspace,
  expectResult,
  ok,
  registerWorker,
  snapshot,
  submitOk,
  tagsOf,
} from '../helpers/fixtures.js';

/** A site where 8 CPUs already make a big worker (the default floor is 16): templates must follow the configuration. */
const SIZE_THRESHOLDS = {
  medium: { cpuCount: 4, memoryGib: 8, diskGib: 50 },
  big: { cpuCount: 8, memoryGib: 32, diskGib: 200 },
};
const EXEC_COMMAND = '/usr/local/bin/cloud-provider';
const t = useTestApp({ tags: { sizeThresholds: SIZE_THRESHOLDS }, providers: { execCommands: [EXEC_COMMAND] } });

/** The credentials under test: this value must never come back out of the server. */
const SECRET = 'sk-live-9f8e7d6c5b4a-DO-NOT-LEAK';
const ROTATED_SECRET = 'sk-live-rotated-0011223344-DO-NOT-LEAK';

const SPEC_FIELDS = `specifications { cpuCount memoryGib diskGib concurrency architectures enableBackends enableTasks image handlers { task command }
  instanceType location providerImage subnetId securityGroupIds command }`;
const POOL_FIELDS = `name providerType hasProviderAccount ${SPEC_FIELDS} providedTags requiredTags
  templateProvidedTags { tag provenance source } templateRequiredTags { tag provenance source }
  maxActiveInstances minIdleInstances idleTimeoutSeconds targetLatencySeconds monthlyRuntimeBudgetSeconds enabled createdAt`;

const POOL_MUTATION = (field: 'createWorkerPool' | 'updateWorkerPool') =>
  `mutation($i: WorkerPoolInput!) { ${field}(input: $i) { __typename ... on WorkerPool { ${POOL_FIELDS} } ${ERROR_FIELDS} } }`;

/** Every response that shows a pool, to search for the secret. */
const responses: unknown[] = [];

async function sealedAccount(name: string): Promise<string | null> {
  const [row] = await t.sql<{ provider_account_encrypted: string | null }>(
    'select provider_account_encrypted from worker_pool where name = ?',
    [name],
  );
  return row.provider_account_encrypted;
}

describe('createWorkerPool', () => {
  it('requires a provider type, naming the choices, and writes nothing', async () => {
    const before = await snapshot(t, ['worker_pool']);
    const r = await ok(t, POOL_MUTATION('createWorkerPool'), { i: { name: 'no-provider' } });
    expect(r.createWorkerPool).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      path: 'input.providerType',
    });
    expect(r.createWorkerPool.message).toMatch(/required: one of .*local.*exec.*hetzner.*ec2.*qemu/);
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
    // A pool that exists keeps its provider when an update names none.
    await ok(t, POOL_MUTATION('createWorkerPool'), { i: { name: 'has-provider', providerType: 'local' } });
    expect(
      (await ok(t, POOL_MUTATION('updateWorkerPool'), { i: { name: 'has-provider', maxActiveInstances: 2 } }))
        .updateWorkerPool.providerType,
    ).toBe('local');
    await t.sql(`delete from worker_pool where name = 'has-provider'`); // the list test below counts the pools
  });

  it('creates a pool with its template tags and seals the provider account', async () => {
    const pool = await expectResult(t, 'WorkerPool', POOL_MUTATION('createWorkerPool'), {
      i: {
        name: 'cloud-big',
        providerType: 'exec',
        providerAccount: { apiKey: SECRET, region: 'eu-west-1' },
        specifications: { cpuCount: 16, memoryGib: 64, diskGib: 200, command: [EXEC_COMMAND, '--zone', 'b'] },
        providedTags: ['worker:class:large', 'site:cloud', 'worker:build-arch:amd64'],
        requiredTags: ['site:cloud-only'],
        maxActiveInstances: 20,
        minIdleInstances: 1,
        idleTimeoutSeconds: 300,
        targetLatencySeconds: 120,
        monthlyRuntimeBudgetSeconds: 3_600_000,
      },
    });
    responses.push(pool);
    expect(pool).toMatchObject({
      name: 'cloud-big',
      providerType: 'exec',
      hasProviderAccount: true,
      specifications: {
        cpuCount: 16,
        memoryGib: 64,
        diskGib: 200,
        concurrency: 1,
        image: null,
        handlers: [],
        architectures: [],
        command: [EXEC_COMMAND, '--zone', 'b'],
      },
      providedTags: ['worker:class:large', 'site:cloud', 'worker:build-arch:amd64'],
      requiredTags: ['site:cloud-only'],
      maxActiveInstances: 20,
      minIdleInstances: 1,
      idleTimeoutSeconds: 300,
      targetLatencySeconds: 120,
      monthlyRuntimeBudgetSeconds: 3_600_000,
      enabled: true,
    });
    expect(pool.templateProvidedTags).toEqual(
      expect.arrayContaining([
        { tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'pool-template' },
        { tag: 'worker:class:large', provenance: 'ADMIN', source: 'pool:cloud-big' },
        { tag: 'site:cloud', provenance: 'ADMIN', source: 'pool:cloud-big' },
        { tag: 'worker:build-arch:amd64', provenance: 'ADMIN', source: 'pool:cloud-big' },
        { tag: 'worker:cpu-count=16', provenance: 'ADMIN', source: 'pool:cloud-big:specifications' },
        { tag: 'worker:memory-gib=64', provenance: 'ADMIN', source: 'pool:cloud-big:specifications' },
        { tag: 'worker:disk-gib=200', provenance: 'ADMIN', source: 'pool:cloud-big:specifications' },
        { tag: 'worker:size:big', provenance: 'ADMIN', source: 'pool:cloud-big:specifications' },
      ]),
    );
    expect(pool.templateProvidedTags).toHaveLength(8);
    expect(pool.templateRequiredTags).toEqual([
      { tag: 'site:cloud-only', provenance: 'ADMIN', source: 'pool:cloud-big' },
    ]);

    const sealed = await sealedAccount('cloud-big');
    expect(sealed).toMatch(/^v1:/);
    expect(sealed).not.toContain(SECRET);
    expect(sealed).not.toContain('apiKey');
    // It is the account, encrypted with the configured key.
    expect(JSON.parse(createSecretBox('test-secret-key').open(sealed!))).toEqual({
      apiKey: SECRET,
      region: 'eu-west-1',
    });
  });

  it('uses defaults and says when no provider account is set', async () => {
    const pool = await expectResult(t, 'WorkerPool', POOL_MUTATION('createWorkerPool'), {
      i: { name: 'local-small', providerType: 'local' },
    });
    responses.push(pool);
    expect(pool).toMatchObject({
      name: 'local-small',
      providerType: 'local',
      hasProviderAccount: false,
      // A local pool with no handler runs noop with `true`: an empty farm can be tried at once.
      specifications: {
        cpuCount: null,
        concurrency: 1,
        architectures: [],
        enableTasks: [],
        handlers: [{ task: 'noop', command: 'true' }],
      },
      providedTags: [],
      requiredTags: [],
      maxActiveInstances: 10,
      minIdleInstances: 0,
      monthlyRuntimeBudgetSeconds: null,
      enabled: true,
    });
    expect(pool.templateProvidedTags).toEqual([
      { tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'pool-template' },
      { tag: 'worker:task:worker:noop:version:1', provenance: 'ADMIN', source: 'pool:local-small:specifications' },
    ]);
    expect(await sealedAccount('local-small')).toBeNull();
  });

  it('an exec pool given no specifications is refused for its missing command, with nothing written (it was a 500)', async () => {
    const before = await snapshot(t);
    const r = await expectResult(t, 'InputError', POOL_MUTATION('createWorkerPool'), {
      i: { name: 'exec-bare', providerType: 'exec' },
    });
    expect(r).toMatchObject({ code: 'INVALID_INPUT', path: 'input.specifications.command' });
    expect(await snapshot(t)).toEqual(before);
  });

  it("classifies the template's size with the configured thresholds, as its workers are", async () => {
    const pool = await expectResult(t, 'WorkerPool', POOL_MUTATION('createWorkerPool'), {
      i: { name: 'eight-cpus', providerType: 'local', specifications: { cpuCount: 8, memoryGib: 32, diskGib: 200 } },
    });
    responses.push(pool);
    await registerWorker(t, 'eight-1', { pool: 'eight-cpus' });
    const { worker } = await ok(t, '{ worker(name: "eight-1") { providedTags { tag } } }');
    expect(tagsOf(worker.providedTags)).toContain('worker:size:big');
    expect(tagsOf(pool.templateProvidedTags)).toContain('worker:size:big');
    expect(tagsOf(pool.templateProvidedTags)).not.toContain('worker:size:medium');
  });

  it.each([
    ['a taken name', { name: 'cloud-big' }, { code: 'ALREADY_EXISTS' }],
    [
      'an unknown provider type',
      { name: 'p-1', providerType: 'aws-magic' },
      { code: 'INVALID_INPUT', path: 'input.providerType' },
    ],
    [
      'an invalid pool tag',
      { name: 'p-2', providedTags: ['ok:tag', 'bad tag'] },
      { code: 'INVALID_TAG', path: 'input.providedTags[1]', tag: 'bad tag' },
    ],
    [
      'a minimum on the provided side',
      { name: 'p-3', providedTags: ['worker:cpu-count>=4'] },
      { code: 'INVALID_TAG', path: 'input.providedTags[0]' },
    ],
    [
      'a negative instance limit',
      { name: 'p-4', maxActiveInstances: -1 },
      { code: 'INVALID_INPUT', path: 'input.maxActiveInstances' },
    ],
    [
      'a provider account that is not an object',
      { name: 'p-5', providerAccount: [SECRET] },
      { code: 'INVALID_INPUT', path: 'input.providerAccount' },
    ],
    [
      'a specification out of range',
      { name: 'p-6', specifications: { cpuCount: 0 } },
      { code: 'INVALID_INPUT', path: 'input.specifications.cpuCount' },
    ],
    [
      'a backend no image has',
      { name: 'p-7', specifications: { enableBackends: ['unshare', 'auto'] } },
      {
        code: 'INVALID_INPUT',
        path: 'input.specifications.enableBackends[1]',
        message: 'input.specifications.enableBackends[1]: must be one of unshare, incus-lxc, incus-vm, qemu',
      },
    ],
    [
      'an unknown task',
      { name: 'p-8', specifications: { enableTasks: ['sbuild', 'compile-kernel'] } },
      {
        code: 'INVALID_INPUT',
        path: 'input.specifications.enableTasks[1]',
        message: expect.stringMatching(/must be one of sbuild, autopkgtest, .*noop, debsign, sign/),
      },
    ],
    [
      'an architecture that is not a Debian name',
      { name: 'p-9', specifications: { architectures: ['amd64', 'AMD 64'] } },
      { code: 'INVALID_INPUT', path: 'input.specifications.architectures[1]' },
    ],
    [
      'a task given twice',
      { name: 'p-10', specifications: { enableTasks: ['sbuild', 'sbuild'] } },
      {
        code: 'INVALID_INPUT',
        path: 'input.specifications.enableTasks[1]',
        message: expect.stringContaining('"sbuild" is given twice'),
      },
    ],
    [
      'a handler command with a newline',
      { name: 'p-11', specifications: { handlers: [{ task: 'noop', command: 'true\nrm -rf /' }] } },
      { code: 'INVALID_INPUT', path: 'input.specifications.handlers[0].command' },
    ],
    [
      'a handler command with a NUL',
      { name: 'p-12', specifications: { handlers: [{ task: 'noop', command: 'true\u0000' }] } },
      { code: 'INVALID_INPUT', path: 'input.specifications.handlers[0].command' },
    ],
    [
      'handlers on a pool that is not local',
      {
        name: 'p-13',
        providerType: 'exec',
        specifications: { command: [EXEC_COMMAND], handlers: [{ task: 'sbuild', command: 'run-sbuild' }] },
      },
      { code: 'INVALID_INPUT', path: 'input.specifications.handlers' },
    ],
    [
      'an image name with a slash',
      { name: 'p-14', specifications: { image: '../../etc/passwd' } },
      { code: 'INVALID_INPUT', path: 'input.specifications.image' },
    ],
    [
      'a concurrency of 0',
      { name: 'p-15', specifications: { concurrency: 0 } },
      { code: 'INVALID_INPUT', path: 'input.specifications.concurrency' },
    ],
    [
      'a huge memory size',
      { name: 'p-17', specifications: { memoryGib: 1e300 } },
      { code: 'INVALID_INPUT', path: 'input.specifications.memoryGib' },
    ],
    [
      'an empty exec command',
      { name: 'p-16', specifications: { command: [] } },
      { code: 'INVALID_INPUT', path: 'input.specifications.command' },
    ],
  ])('refuses %s and writes nothing', async (_label, input, expected) => {
    const before = await snapshot(t, ['worker_pool']);
    const r = await ok(t, POOL_MUTATION('createWorkerPool'), { i: { providerType: 'local', ...input } });
    expect(r.createWorkerPool).toMatchObject(expected);
    expect(JSON.stringify(r)).not.toContain(SECRET);
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
  });
});

describe('updateWorkerPool', () => {
  beforeAll(async () => {
    await createPool(t, {
      name: 'upd',
      providedTags: ['site:old'],
      specifications: { cpuCount: 4, memoryGib: 8, diskGib: 50 },
      providerAccount: { apiKey: SECRET },
    });
    await registerWorker(t, 'upd-1', { pool: 'upd' });
    await registerWorker(t, 'upd-2', { pool: 'upd', staticMetadata: { providedTags: ['site:mine'] } });
    await registerWorker(t, 'not-upd', {});
  });

  const workerTags = async (name: string) => {
    const r = await ok(
      t,
      'query($n: String!) { worker(name: $n) { providedTags { tag provenance source } requiredTags { tag provenance source } } }',
      { n: name },
    );
    return r.worker as {
      providedTags: { tag: string; provenance: string; source: string }[];
      requiredTags: { tag: string }[];
    };
  };

  it("recomputes its workers' tags when the pool's tags and specifications change", async () => {
    expect(tagsOf((await workerTags('upd-1')).providedTags)).toContain('site:old');
    const pool = await expectResult(t, 'WorkerPool', POOL_MUTATION('updateWorkerPool'), {
      i: {
        name: 'upd',
        providedTags: ['site:new', 'worker:class:large'],
        requiredTags: ['site:exclusive'],
        specifications: { cpuCount: 16, memoryGib: 32, diskGib: 200 },
      },
    });
    responses.push(pool);
    expect(pool.providedTags).toEqual(['site:new', 'worker:class:large']);
    expect(pool.hasProviderAccount).toBe(true);

    for (const name of ['upd-1', 'upd-2']) {
      const w = await workerTags(name);
      const provided = tagsOf(w.providedTags);
      expect(provided).not.toContain('site:old');
      expect(provided).not.toContain('worker:cpu-count=4');
      expect(w.providedTags).toEqual(
        expect.arrayContaining([
          { tag: 'site:new', provenance: 'ADMIN', source: 'pool:upd' },
          { tag: 'worker:class:large', provenance: 'ADMIN', source: 'pool:upd' },
          { tag: 'worker:cpu-count=16', provenance: 'ADMIN', source: 'pool:upd:specifications' },
          { tag: 'worker:size:big', provenance: 'ADMIN', source: 'pool:upd:specifications' },
        ]),
      );
      expect(w.requiredTags).toEqual([{ tag: 'site:exclusive', provenance: 'ADMIN', source: 'pool:upd' }]);
    }
    // The worker's own static metadata stays.
    expect(tagsOf((await workerTags('upd-2')).providedTags)).toContain('site:mine');
    // Workers of other pools are untouched.
    expect(tagsOf((await workerTags('not-upd')).providedTags)).toEqual(['worker:type:worker']);
    // The matcher's plain column follows.
    const [row] = await t.sql<{ provided_tags: string[]; required_tags: string[] }>(
      `select provided_tags, required_tags from worker where name = 'upd-1'`,
    );
    expect(row.provided_tags).toContain('site:new');
    expect(row.provided_tags).not.toContain('site:old');
    expect(row.required_tags).toEqual(['site:exclusive']);
  });

  it('keeps the fields it is not given, and re-seals a new provider account', async () => {
    const sealedBefore = await sealedAccount('upd');
    const pool = await expectResult(t, 'WorkerPool', POOL_MUTATION('updateWorkerPool'), {
      i: { name: 'upd', enabled: false, providerAccount: { apiKey: ROTATED_SECRET } },
    });
    responses.push(pool);
    expect(pool).toMatchObject({
      enabled: false,
      providedTags: ['site:new', 'worker:class:large'],
      specifications: { cpuCount: 16 },
      hasProviderAccount: true,
    });
    const sealedAfter = await sealedAccount('upd');
    expect(sealedAfter).not.toBe(sealedBefore);
    expect(sealedAfter).not.toContain(ROTATED_SECRET);
    expect(JSON.parse(createSecretBox('test-secret-key').open(sealedAfter!))).toEqual({ apiKey: ROTATED_SECRET });
  });

  it.each([
    [
      'an unknown pool',
      { name: 'nope', enabled: true },
      { __typename: 'NotFoundError', code: 'NOT_FOUND', path: 'input.name' },
    ],
    [
      'an invalid required tag',
      { name: 'upd', requiredTags: ['site:fine', 'worker:memory-gib=4'] },
      { code: 'INVALID_TAG', path: 'input.requiredTags[1]', tag: 'worker:memory-gib=4' },
    ],
  ])('refuses %s and changes nothing (pool nor workers)', async (_label, input, expected) => {
    const before = await snapshot(t, ['worker_pool', 'worker']);
    const r = await ok(t, POOL_MUTATION('updateWorkerPool'), { i: input });
    expect(r.updateWorkerPool).toMatchObject(expected);
    expect(await snapshot(t, ['worker_pool', 'worker'])).toEqual(before);
  });
});

describe('workerPools and workerPool', () => {
  it('list every pool by name, and find one by name', async () => {
    const all = await ok(t, `{ workerPools { ${POOL_FIELDS} } }`);
    responses.push(all);
    expect(all.workerPools.map((p: { name: string }) => p.name)).toEqual([
      'cloud-big',
      'eight-cpus',
      'local-small',
      'upd',
    ]);
    const one = await ok(t, `{ workerPool(name: "cloud-big") { ${POOL_FIELDS} } }`);
    responses.push(one);
    expect(one.workerPool).toEqual(all.workerPools[0]);
    expect(await ok(t, '{ workerPool(name: "nope") { name } }')).toEqual({ workerPool: null });
  });

  it('are readable by anonymous callers and worker tokens, still without the account', async () => {
    const workerToken = await registerWorker(t, 'reader', { pool: 'cloud-big' });
    for (const token of [null, workerToken]) {
      const r = await ok(
        t,
        `{ workerPools { ${POOL_FIELDS} } workerPool(name: "cloud-big") { ${POOL_FIELDS} } }`,
        {},
        token,
      );
      responses.push(r);
      expect(r.workerPool.hasProviderAccount).toBe(true);
    }
  });

  it('are shown through workers too', async () => {
    const r = await ok(
      t,
      `{ workers(filter: { includeInactive: true }) { edges { node { name pool { ${POOL_FIELDS} } } } } worker(name: "upd-1") { pool { ${POOL_FIELDS} } } }`,
    );
    responses.push(r);
    expect(r.worker.pool.name).toBe('upd');
  });

  it('never return the provider account, in any response that shows a pool', async () => {
    expect(responses.length).toBeGreaterThanOrEqual(8);
    const sealed = [await sealedAccount('cloud-big'), await sealedAccount('upd')];
    for (const response of responses) {
      const text = JSON.stringify(response);
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(ROTATED_SECRET);
      expect(text).not.toContain('apiKey');
      expect(text).not.toContain('eu-west-1');
      for (const s of sealed) expect(text).not.toContain(s);
    }
  });

  it('offers no field that could return it', async () => {
    const r = await ok(t, '{ __type(name: "WorkerPool") { fields { name } } }');
    const fields = r.__type.fields.map((f: { name: string }) => f.name);
    expect(fields.filter((f: string) => /account|secret|credential/i.test(f))).toEqual(['hasProviderAccount']);
  });
});

describe('typed specifications', () => {
  it('give the template what the image holds: a pool for sbuild needs no tag added by hand', async () => {
    await createWorkspace(t, 'debian/spec');
    const pool = await expectResult(t, 'WorkerPool', POOL_MUTATION('createWorkerPool'), {
      i: {
        name: 'sbuild-farm',
        providerType: 'local',
        specifications: {
          architectures: ['amd64', 'i386'],
          enableBackends: ['unshare', 'qemu'],
          enableTasks: ['sbuild', 'sign'],
          concurrency: 2,
        },
      },
    });
    responses.push(pool);
    const source = 'pool:sbuild-farm:specifications';
    expect(pool.templateProvidedTags).toEqual([
      { tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'pool-template' },
      ...[
        'worker:build-arch:amd64',
        'worker:build-arch:i386',
        'worker:executor:unshare',
        'worker:executor:qemu',
        'worker:cap:sbuild',
        'worker:cap:sbsign',
        'worker:task:worker:sbuild:version:1',
        'worker:task:signing:sign:version:1',
        'worker:task:worker:noop:version:1', // the default handler of a local pool
      ].map((tag) => ({ tag, provenance: 'ADMIN', source })),
    ]);
    expect(pool.specifications.concurrency).toBe(2);
    // An sbuild for i386 waits for this pool, and nothing else: the template matches it.
    const wr = await submitOk(t, {
      workspace: 'debian/spec',
      taskType: 'worker',
      taskName: 'sbuild',
      taskData: { source_package: 'hello', host_architecture: 'i386' },
    });
    const { workRequest } = await ok(
      t,
      'query($id: ID!) { workRequest(id: $id) { diagnosis { state matchingPools } } }',
      { id: wr.id },
    );
    expect(workRequest.diagnosis).toEqual({ state: 'WAITING_FOR_PROVISIONING', matchingPools: ['sbuild-farm'] });
  });

  it("give the pool's workers its concurrency, now and when it changes", async () => {
    await createPool(t, { name: 'conc', specifications: { concurrency: 3 } });
    await registerWorker(t, 'conc-1', { pool: 'conc' });
    await registerWorker(t, 'conc-2', { pool: 'conc', concurrency: 1 }); // told otherwise
    const activation = (
      await ok(
        t,
        `mutation { createActivationToken(input: { pool: "conc" }) { ... on ActivationTokenPayload { token } } }`,
      )
    ).createActivationToken.token;
    await ok(t, `mutation { activateWorker(input: { name: "conc-3" }) { __typename } }`, {}, activation);
    const concurrency = async () =>
      Object.fromEntries(
        (
          await t.sql<{ name: string; concurrency: number }>(
            `select name, concurrency from worker where name like 'conc-%' order by name`,
          )
        ).map((r) => [r.name, r.concurrency]),
      );
    expect(await concurrency()).toEqual({ 'conc-1': 3, 'conc-2': 1, 'conc-3': 3 });
    await expectResult(t, 'WorkerPool', POOL_MUTATION('updateWorkerPool'), {
      i: { name: 'conc', specifications: { concurrency: 4 } },
    });
    expect(await concurrency()).toEqual({ 'conc-1': 4, 'conc-2': 4, 'conc-3': 4 });
  });

  it('show handler and exec commands to admins only', async () => {
    await createPool(t, {
      name: 'cmds',
      specifications: { handlers: [{ task: 'sbuild', command: '/srv/build --secret-path /srv/x' }] },
    });
    const query = `{ workerPool(name: "cmds") { specifications { handlers { task command } command } } }`;
    expect((await ok(t, query)).workerPool.specifications).toEqual({
      handlers: [{ task: 'sbuild', command: '/srv/build --secret-path /srv/x' }],
      command: null,
    });
    const user = await createUser(t, 'spec-reader');
    for (const token of [null, user])
      expect((await ok(t, query, {}, token)).workerPool.specifications).toEqual({ handlers: null, command: null });
  });
});
