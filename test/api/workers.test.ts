import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  AMD64_METADATA,
  ERROR_FIELDS,
  connectedWorker,
  createPool,
  expectResult,
  ok,
  registerWorker,
  reportMetadata,
  tagsOf,
} from '../helpers/fixtures.js';

const t = useTestApp();

const WORKER_FIELDS = `name type status concurrency enabled draining connectedAt lastSeenAt registeredAt instanceCreatedAt terminatedAt
  pool { name } activeWorkCount staticMetadata dynamicMetadata
  providedTags { tag provenance source } requiredTags { tag provenance source } rejectedTags { tag provenance source set code reason }`;

const workerQuery = (name: string) =>
  ok(t, `query($n: String!) { worker(name: $n) { ${WORKER_FIELDS} } }`, { n: name });

describe('registerWorker', () => {
  it('creates a disconnected worker with its system tags and returns its token once', async () => {
    const r = await expectResult(
      t,
      'WorkerTokenPayload',
      `mutation { registerWorker(input: { name: "reg-1", type: SIGNING, concurrency: 3 }) {
        __typename ... on WorkerTokenPayload { token worker { ${WORKER_FIELDS} } } ${ERROR_FIELDS} } }`,
    );
    expect(r.token).toMatch(/^tsk_worker_/);
    expect(r.worker).toMatchObject({
      name: 'reg-1',
      type: 'SIGNING',
      concurrency: 3,
      status: 'DISCONNECTED',
      enabled: true,
      draining: false,
      pool: null,
    });
    expect(r.worker.providedTags).toEqual([
      { tag: 'worker:type:signing', provenance: 'SYSTEM', source: 'worker.type' },
    ]);
    expect(r.worker.connectedAt).toBeNull();
    // Only the hash is stored.
    const stored = await t.sql<{ hash: string }>(
      `select t.hash from token t join worker w on w.id = t.worker_id where w.name = 'reg-1'`,
    );
    expect(stored).toHaveLength(1);
    expect(stored[0].hash).not.toContain(r.token);
    expect(stored[0].hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it.each([
    ['a taken name', { name: 'reg-1' }, 'ALREADY_EXISTS'],
    ['an unknown pool', { name: 'reg-2', pool: 'no-such-pool' }, 'NOT_FOUND'],
    ['a name with a slash', { name: 'a/b' }, 'INVALID_INPUT'],
    ['a concurrency of 0', { name: 'reg-3', concurrency: 0 }, 'INVALID_INPUT'],
  ])('refuses %s', async (_label, input, code) => {
    const before = await t.sql<{ n: number }>('select count(*)::int as n from worker');
    const r = await ok(
      t,
      `mutation($i: RegisterWorkerInput!) { registerWorker(input: $i) { __typename ${ERROR_FIELDS} } }`,
      { i: input },
    );
    expect(r.registerWorker.code).toBe(code);
    expect(await t.sql('select count(*)::int as n from worker')).toEqual(before);
  });
});

describe('reportWorkerMetadata', () => {
  let token: string;
  beforeAll(async () => {
    token = await registerWorker(t, 'meta-1');
  });

  it('derives tags from the facts, connects the worker, and drops the tags a worker may not claim', async () => {
    const w = await reportMetadata(t, token, {
      ...AMD64_METADATA,
      architectures: ['amd64', 'i386'],
      providedTags: ['worker:class:trusted', 'worker:type:server', 'worker:cap:kvm'],
      requiredTags: ['site:security'],
    });
    expect(w.status).toBe('IDLE');
    expect(w.providedTags).toEqual(
      expect.arrayContaining([
        { tag: 'worker:build-arch:amd64', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:build-arch:i386', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:cpu-count=4', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:memory-gib=8', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:disk-gib=50', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:size:medium', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:executor:unshare', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:cap:sbuild', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:cap:kvm', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:task:worker:sbuild:version:1', provenance: 'WORKER', source: 'dynamic-metadata' },
        { tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'worker.type' },
      ]),
    );
    const provided = tagsOf(w.providedTags);
    expect(provided).not.toContain('worker:class:trusted');
    expect(provided).not.toContain('worker:type:server');
    const rejected = Object.fromEntries(w.rejectedTags.map((r: { tag: string; code: string }) => [r.tag, r.code]));
    expect(rejected).toEqual({
      'worker:class:trusted': 'PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY',
      'worker:type:server': 'PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY',
      'site:security': 'PROVENANCE_NOT_ALLOWED_FOR_SET',
    });
    for (const r of w.rejectedTags) {
      expect(r.provenance).toBe('WORKER');
      expect(r.reason).toContain(r.tag);
    }

    const { worker } = await workerQuery('meta-1');
    expect(worker.requiredTags).toEqual([]);
    expect(worker.connectedAt).not.toBeNull();
    expect(worker.lastSeenAt).not.toBeNull();
    expect(worker.dynamicMetadata).toMatchObject({ 'system:architectures': ['amd64', 'i386'], 'system:cpu_count': 4 });
    // The stored plain set (for the matcher) agrees with the entries shown.
    const [row] = await t.sql<{ provided_tags: string[] }>(`select provided_tags from worker where name = 'meta-1'`);
    expect([...row.provided_tags].sort()).toEqual([...new Set(provided)].sort());
  });

  it('replaces the previous report: tags of the old report disappear', async () => {
    const w = await reportMetadata(t, token, { architectures: ['arm64'] });
    expect(tagsOf(w.providedTags).sort()).toEqual(['worker:build-arch:arm64', 'worker:type:worker']);
    expect(w.rejectedTags).toEqual([]);
  });
});

describe('setWorkerStaticMetadata', () => {
  it('wins over dynamic metadata on a key conflict and may provide admin-only tags', async () => {
    const token = await connectedWorker(t, 'static-1');
    const r = await expectResult(
      t,
      'Worker',
      `mutation($m: WorkerMetadataInput!) { setWorkerStaticMetadata(input: { name: "static-1", metadata: $m, concurrency: 4 }) {
        __typename ... on Worker { ${WORKER_FIELDS} } ${ERROR_FIELDS} } }`,
      {
        m: {
          architectures: ['arm64'],
          cpuCount: 32,
          providedTags: ['worker:class:trusted', 'site:gpu'],
          requiredTags: ['site:security'],
        },
      },
    );
    expect(r.concurrency).toBe(4);
    const provided = tagsOf(r.providedTags);
    // Static architectures replace the reported ones; the reported tools stay.
    expect(provided).toContain('worker:build-arch:arm64');
    expect(provided).not.toContain('worker:build-arch:amd64');
    expect(r.providedTags).toContainEqual({
      tag: 'worker:cpu-count=32',
      provenance: 'ADMIN',
      source: 'static-metadata',
    });
    expect(provided).not.toContain('worker:cpu-count=4');
    expect(r.providedTags).toContainEqual({
      tag: 'worker:cap:sbuild',
      provenance: 'WORKER',
      source: 'dynamic-metadata',
    });
    expect(r.providedTags).toContainEqual({
      tag: 'worker:class:trusted',
      provenance: 'ADMIN',
      source: 'static-metadata',
    });
    expect(r.providedTags).toContainEqual({ tag: 'site:gpu', provenance: 'ADMIN', source: 'static-metadata' });
    expect(r.requiredTags).toEqual([{ tag: 'site:security', provenance: 'ADMIN', source: 'static-metadata' }]);
    expect(r.rejectedTags).toEqual([]);

    // A later report by the worker does not undo the admin's choices.
    const again = await reportMetadata(t, token, {
      ...AMD64_METADATA,
      cpuCount: 2,
      providedTags: ['worker:class:trusted'],
    });
    expect(tagsOf(again.providedTags)).toEqual(
      expect.arrayContaining(['worker:build-arch:arm64', 'worker:cpu-count=32', 'worker:class:trusted']),
    );
    expect(tagsOf(again.providedTags)).not.toContain('worker:build-arch:amd64');
    expect(again.providedTags).not.toContainEqual(
      expect.objectContaining({ tag: 'worker:class:trusted', provenance: 'WORKER' }),
    );
  });

  it('refuses an unknown worker with NOT_FOUND', async () => {
    const r = await ok(
      t,
      `mutation { setWorkerStaticMetadata(input: { name: "nobody", metadata: {} }) { __typename ${ERROR_FIELDS} } }`,
    );
    expect(r.setWorkerStaticMetadata).toMatchObject({
      __typename: 'NotFoundError',
      code: 'NOT_FOUND',
      path: 'input.name',
    });
  });
});

describe('drain, undrain, enable, disable', () => {
  beforeAll(async () => {
    await connectedWorker(t, 'switch-1');
  });

  it.each([
    ['drainWorker', { status: 'DRAINING', draining: true, enabled: true }],
    ['undrainWorker', { status: 'IDLE', draining: false, enabled: true }],
    ['disableWorker', { status: 'DISABLED', draining: false, enabled: false }],
    ['enableWorker', { status: 'IDLE', draining: false, enabled: true }],
  ])('%s changes the status', async (mutation, expected) => {
    const r = await expectResult(
      t,
      'Worker',
      `mutation { ${mutation}(input: { name: "switch-1" }) { __typename ... on Worker { name status draining enabled } ${ERROR_FIELDS} } }`,
    );
    expect(r).toMatchObject({ name: 'switch-1', ...expected });
    const { worker } = await workerQuery('switch-1');
    expect(worker).toMatchObject(expected);
  });

  it('shows DISABLED before DRAINING', async () => {
    await ok(t, 'mutation { drainWorker(input: { name: "switch-1" }) { __typename } }');
    await ok(t, 'mutation { disableWorker(input: { name: "switch-1" }) { __typename } }');
    expect((await workerQuery('switch-1')).worker).toMatchObject({
      status: 'DISABLED',
      draining: true,
      enabled: false,
    });
    await ok(t, 'mutation { enableWorker(input: { name: "switch-1" }) { __typename } }');
    expect((await workerQuery('switch-1')).worker.status).toBe('DRAINING');
    await ok(t, 'mutation { undrainWorker(input: { name: "switch-1" }) { __typename } }');
  });

  it.each(['drainWorker', 'undrainWorker', 'enableWorker', 'disableWorker'])(
    '%s of an unknown worker is NOT_FOUND',
    async (mutation) => {
      const r = await ok(t, `mutation { ${mutation}(input: { name: "ghost" }) { __typename ${ERROR_FIELDS} } }`);
      expect(r[mutation]).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    },
  );
});

describe('activateWorker', () => {
  it('trades a one-shot activation token for a worker of the pool, and refuses a second use with 401', async () => {
    await createPool(t, {
      name: 'act-pool',
      providedTags: ['site:cloud'],
      specifications: { cpuCount: 2, memoryGib: 4, diskGib: 20 },
    });
    const created = await expectResult(
      t,
      'ActivationTokenPayload',
      `mutation { createActivationToken(input: { pool: "act-pool" }) { __typename ... on ActivationTokenPayload { token } ${ERROR_FIELDS} } }`,
    );
    const activation = created.token as string;

    const activated = await expectResult(
      t,
      'WorkerTokenPayload',
      `mutation { activateWorker(input: { name: "act-1" }) { __typename ... on WorkerTokenPayload { token worker { ${WORKER_FIELDS} } } ${ERROR_FIELDS} } }`,
      {},
      activation,
    );
    expect(activated.worker).toMatchObject({
      name: 'act-1',
      type: 'WORKER',
      pool: { name: 'act-pool' },
      status: 'DISCONNECTED',
    });
    expect(activated.worker.instanceCreatedAt).not.toBeNull();
    expect(activated.worker.providedTags).toEqual(
      expect.arrayContaining([
        { tag: 'site:cloud', provenance: 'ADMIN', source: 'pool:act-pool' },
        { tag: 'worker:cpu-count=2', provenance: 'ADMIN', source: 'pool:act-pool:specifications' },
        { tag: 'worker:size:small', provenance: 'ADMIN', source: 'pool:act-pool:specifications' },
      ]),
    );

    // The worker token it got works.
    const w = await reportMetadata(t, activated.token as string);
    expect(w).toMatchObject({ name: 'act-1', status: 'IDLE' });

    const again = await t.gql(`mutation { activateWorker(input: { name: "act-2" }) { __typename } }`, {}, activation);
    expect(again.status).toBe(401);
    expect(again.errors?.[0].extensions?.code).toBe('UNAUTHENTICATED');
    expect(await t.sql(`select 1 from worker where name = 'act-2'`)).toEqual([]);
  });

  it('gives one worker for one token even when it is used several times at once', async () => {
    const { createActivationToken } = await ok(
      t,
      `mutation { createActivationToken(input: { pool: "act-pool" }) { ... on ActivationTokenPayload { token } } }`,
    );
    const names = ['race-1', 'race-2', 'race-3', 'race-4'];
    const results = await Promise.all(
      names.map((n) =>
        t.gql(
          `mutation($n: String) { activateWorker(input: { name: $n }) { __typename ${ERROR_FIELDS} } }`,
          { n },
          createActivationToken.token,
        ),
      ),
    );
    const winners = results.filter((r) => r.data?.activateWorker.__typename === 'WorkerTokenPayload');
    expect(winners).toHaveLength(1);
    // The others are refused, whether they lost the race at the token check (401) or at the claim.
    for (const r of results.filter((x) => !winners.includes(x))) {
      const code = r.status === 401 ? r.errors?.[0].extensions?.code : r.data?.activateWorker.code;
      expect(code).toBe('UNAUTHENTICATED');
    }
    expect(await t.sql(`select name from worker where name like 'race-%'`)).toHaveLength(1);
  });

  it('names the worker after its pool when no name is given', async () => {
    const { createActivationToken } = await ok(
      t,
      `mutation { createActivationToken(input: { pool: "act-pool" }) { ... on ActivationTokenPayload { token } } }`,
    );
    const r = await expectResult(
      t,
      'WorkerTokenPayload',
      `mutation { activateWorker(input: {}) { __typename ... on WorkerTokenPayload { worker { name pool { name } } } } }`,
      {},
      createActivationToken.token,
    );
    expect(r.worker.name).toMatch(/^act-pool-/);
  });

  it('needs an activation token', async () => {
    const r = await ok(t, `mutation { activateWorker(input: { name: "act-3" }) { __typename ${ERROR_FIELDS} } }`);
    expect(r.activateWorker.code).toBe('FORBIDDEN');
    const anon = await ok(
      t,
      `mutation { activateWorker(input: { name: "act-3" }) { __typename ${ERROR_FIELDS} } }`,
      {},
      null,
    );
    expect(anon.activateWorker.code).toBe('UNAUTHENTICATED');
  });

  it('refuses an activation token for an unknown pool with NOT_FOUND', async () => {
    const r = await ok(t, `mutation { createActivationToken(input: { pool: "nope" }) { __typename ${ERROR_FIELDS} } }`);
    expect(r.createActivationToken).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
  });
});

describe('workers and worker queries', () => {
  beforeAll(async () => {
    await createPool(t, { name: 'list-a', providedTags: ['site:list-a'] });
    await createPool(t, { name: 'list-b', requiredTags: ['site:only-b'] });
    for (const n of ['la-1', 'la-2', 'la-3']) await registerWorker(t, n, { pool: 'list-a' });
    for (const n of ['lb-1', 'lb-2']) await registerWorker(t, n, { pool: 'list-b' });
    await registerWorker(t, 'lsrv-1', { type: 'SERVER' });
    await registerWorker(t, 'la-gone', { pool: 'list-a' });
    await t.sql(`update worker set terminated_at = now() where name = 'la-gone'`);
  });

  const names = async (filter: Record<string, unknown>, first = 100) => {
    const r = await ok(
      t,
      'query($f: WorkerFilter, $n: Int) { workers(filter: $f, first: $n) { edges { node { name } } } }',
      { f: filter, n: first },
    );
    return r.workers.edges.map((e: { node: { name: string } }) => e.node.name);
  };

  it.each([
    ['pool', { pool: 'list-a' }, ['la-1', 'la-2', 'la-3']],
    ['pool with inactive', { pool: 'list-a', includeInactive: true }, ['la-1', 'la-2', 'la-3', 'la-gone']],
    ['type', { type: 'SERVER' }, ['lsrv-1']],
    ['providesTag', { providesTag: 'site:list-a' }, ['la-1', 'la-2', 'la-3']],
    ['requiresTag', { requiresTag: 'site:only-b' }, ['lb-1', 'lb-2']],
    ['a tag nobody has', { providesTag: 'site:list' }, []],
  ])('filters by %s', async (_label, filter, expected) => {
    expect(await names(filter)).toEqual(expected);
  });

  it('hides terminated dynamic workers unless includeInactive, and shows them INACTIVE', async () => {
    expect(await names({})).not.toContain('la-gone');
    expect(await names({ includeInactive: true })).toContain('la-gone');
    expect((await workerQuery('la-gone')).worker.status).toBe('INACTIVE');
  });

  it('pages by cursor in name order without gaps or repeats', async () => {
    const all = await names({ includeInactive: true }, 500);
    expect(all).toEqual([...all].sort());
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      const r = await ok(
        t,
        'query($a: String) { workers(first: 3, after: $a, filter: { includeInactive: true }) { edges { cursor node { name } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }',
        { a: after },
      );
      const { edges, pageInfo } = r.workers;
      pages += 1;
      expect(edges.length).toBeLessThanOrEqual(3);
      expect(pageInfo.hasPreviousPage).toBe(after !== null);
      expect(pageInfo.endCursor).toBe(edges.at(-1)?.cursor ?? null);
      seen.push(...edges.map((e: { node: { name: string } }) => e.node.name));
      if (!pageInfo.hasNextPage) break;
      after = pageInfo.endCursor;
    }
    expect(seen).toEqual(all);
    expect(pages).toBe(Math.ceil(all.length / 3) || 1);
  });

  it('refuses a cursor it did not make, and a page size out of range', async () => {
    const bad = await t.gql('{ workers(after: "not-a-cursor") { edges { node { name } } } }');
    expect(bad.errors?.[0].message).toMatch(/invalid cursor/);
    const big = await t.gql('{ workers(first: 100000) { edges { node { name } } } }');
    expect(big.errors?.[0].message).toMatch(/first must be between/);
  });

  it('returns null for an unknown worker', async () => {
    expect(await ok(t, '{ worker(name: "nobody") { name } }')).toEqual({ worker: null });
  });
});

describe('heartbeat', () => {
  it('marks the worker seen and connected, sets shutting down when told (and only then), and lists what it has not acknowledged', async () => {
    const token = await registerWorker(t, 'beat-1');
    const beat = (input: Record<string, unknown>) =>
      ok(
        t,
        `mutation($i: HeartbeatInput!) { heartbeat(input: $i) { __typename ... on HeartbeatPayload { draining worker { name connectedAt lastSeenAt } assignedWorkRequests { id } } } }`,
        { i: input },
        token,
      );
    // Its watchers' events, as they come (another test's late ones are not this worker's).
    const changed = t.app.events.subscribe('workerChanged')[Symbol.asyncIterator]();
    const told: string[] = [];
    let next = changed.next(); // subscribes
    void (async () => {
      for (let e = await next; !e.done; e = await (next = changed.next()))
        if ((e.value as { name?: string }).name === 'beat-1') told.push('changed');
    })();
    await t.app.events.listening?.();
    const first = (await beat({})).heartbeat;
    expect(first).toMatchObject({
      __typename: 'HeartbeatPayload',
      draining: false,
      worker: { name: 'beat-1' },
      assignedWorkRequests: [],
    });
    expect(first.worker.connectedAt).not.toBeNull();
    expect(Date.now() - Date.parse(first.worker.lastSeenAt)).toBeLessThan(60_000);
    const connectedAt = first.worker.connectedAt;

    // Shutting down: draining from now on, and its watchers are told.
    const down = (await beat({ shuttingDown: true })).heartbeat;
    expect(down.draining).toBe(true);
    expect(down.worker.connectedAt).toBe(connectedAt);
    // Without the flag it stays as it was (nothing to tell); with false it is lifted (told again).
    expect((await beat({})).heartbeat.draining).toBe(true);
    expect((await beat({ shuttingDown: false })).heartbeat.draining).toBe(false);
    const [row] = await t.sql<{ shutting_down: boolean }>(`select shutting_down from worker where name = 'beat-1'`);
    expect(row.shutting_down).toBe(false);
    for (let i = 0; i < 100 && told.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 200)); // nothing more comes
    expect(told).toEqual(['changed', 'changed']);
    await changed.return?.();
  });
});
