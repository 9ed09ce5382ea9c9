import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { AMD64_METADATA } from '../helpers/fixtures.js';

// Automatic scheduling on, but no pass can run during a test (the debounce and the interval are an
// hour, and app.start() is never called): whatever is assigned here was placed by createWorkRequest.
const t = useTestApp({ scheduler: { automatic: true, passDebounceMs: 3_600_000, passIntervalMs: 3_600_000 } });

const META = (arch: string, memoryGib = 8) => ({
  ...AMD64_METADATA,
  architectures: [arch],
  totalPhysicalMemory: memoryGib * 1024 ** 3,
});

async function worker(
  name: string,
  arch: string,
  opts: {
    concurrency?: number;
    memoryGib?: number;
    requiredTags?: string[];
    providedTags?: string[];
    pool?: string;
  } = {},
): Promise<string> {
  const reg = await t.gql(
    `mutation($n: String!, $c: Int, $s: WorkerMetadataInput, $p: String) { registerWorker(input: { name: $n, concurrency: $c, staticMetadata: $s, pool: $p }) { ... on WorkerTokenPayload { token } ... on Error { message } } }`,
    {
      n: name,
      c: opts.concurrency ?? 1,
      s:
        opts.requiredTags || opts.providedTags
          ? { requiredTags: opts.requiredTags, providedTags: opts.providedTags }
          : null,
      p: opts.pool ?? null,
    },
  );
  const token = reg.data!.registerWorker.token as string;
  expect(token, JSON.stringify(reg)).toBeDefined();
  const rep = await t.gql(
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
    { m: META(arch, opts.memoryGib) },
    token,
  );
  expect(rep.data!.reportWorkerMetadata.__typename).toBe('Worker');
  return token;
}

async function sbuild(arch: string, extra: { requiredTags?: string[]; workspace?: string } = {}): Promise<string> {
  const r = await t.gql(
    `mutation($w: String!, $d: JSON!, $r: [String!]) { createWorkRequest(input: { workspace: $w, taskType: "worker", taskName: "sbuild", taskData: $d, requiredTags: $r }) { ... on WorkRequest { id } ... on Error { code message } } }`,
    {
      w: extra.workspace ?? 'debian/main',
      d: { source_package: 'hello', host_architecture: arch },
      r: extra.requiredTags ?? null,
    },
  );
  expect(r.data!.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
  return r.data!.createWorkRequest.id as string;
}

async function stateOf(id: string): Promise<{ status: string; worker: string | null }> {
  const [row] = await t.sql<{ status: string; worker: string | null }>(
    `select r.status, w.name as worker from work_request r left join worker w on w.id = r.worker_id where r.id = ?`,
    [id],
  );
  return row;
}

describe('a new request is placed at once on a free worker (no pass)', () => {
  it('goes to an idle worker that may run it, and not to one that may not', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    await worker('place-amd', 'amd64');
    const created = await t.gql(
      `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "sbuild", taskData: { source_package: "hello", host_architecture: "amd64" } }) { ... on WorkRequest { id status worker { name } } } }`,
    );
    // The answer says what the request is once the mutation returns: already assigned.
    expect(created.data!.createWorkRequest).toMatchObject({ status: 'ASSIGNED', worker: { name: 'place-amd' } });
    expect(await stateOf(created.data!.createWorkRequest.id)).toEqual({ status: 'ASSIGNED', worker: 'place-amd' });
    const id = await sbuild('amd64'); // concurrency 1: the next one waits
    expect(await stateOf(id)).toEqual({ status: 'PENDING', worker: null });
    // No worker builds for s390x: it waits, and nothing else changed.
    const other = await sbuild('s390x');
    expect(await stateOf(other)).toEqual({ status: 'PENDING', worker: null });
  });

  it('does not exceed a worker’s concurrency', async () => {
    await worker('place-i386', 'i386', { concurrency: 1 });
    const first = await sbuild('i386');
    const second = await sbuild('i386');
    expect(await stateOf(first)).toEqual({ status: 'ASSIGNED', worker: 'place-i386' });
    expect(await stateOf(second)).toEqual({ status: 'PENDING', worker: null });
  });

  it('checks minimums exactly: a worker with too little memory is passed over for one with enough', async () => {
    await worker('place-ppc-small', 'ppc64el', { memoryGib: 4 });
    const big = await sbuild('ppc64el', { requiredTags: ['worker:memory-gib>=16'] });
    expect(await stateOf(big)).toEqual({ status: 'PENDING', worker: null });
    await worker('place-ppc-large', 'ppc64el', { memoryGib: 32 });
    const big2 = await sbuild('ppc64el', { requiredTags: ['worker:memory-gib>=16'] });
    // The large worker pulls the head of its queue: the older request of the same class, not the new one.
    expect(await stateOf(big)).toEqual({ status: 'ASSIGNED', worker: 'place-ppc-large' });
    expect(await stateOf(big2)).toEqual({ status: 'PENDING', worker: null });
  });

  it('prefers a free static worker to a free pool worker, and takes the pool worker when the static one is busy', async () => {
    await t.gql(`mutation { createWorkerPool(input: { name: "place-pool", providerType: "local" }) { __typename } }`);
    // The pool worker is registered first (a lower id) and can run the same work.
    await worker('place-s390x-pooled', 's390x', { pool: 'place-pool' });
    await worker('place-s390x-static', 's390x');
    // The first test's s390x request still waits (no pass runs here): put it aside, or a worker would pull it first.
    await t.sql(
      `update work_request set status = 'ABORTED' where status = 'PENDING' and required_tags @> '{worker:build-arch:s390x}'`,
    );
    const first = await sbuild('s390x');
    expect(await stateOf(first)).toEqual({ status: 'ASSIGNED', worker: 'place-s390x-static' });
    const second = await sbuild('s390x');
    expect(await stateOf(second)).toEqual({ status: 'ASSIGNED', worker: 'place-s390x-pooled' });
  });

  it('puts heavy work on the largest free worker and other work on the smallest that fits', async () => {
    // Both may run heavy work (worker:class:large); the larger is registered first (a lower id).
    await worker('place-armel-64g', 'armel', { memoryGib: 64, providedTags: ['worker:class:large'] });
    await worker('place-armel-8g', 'armel', { memoryGib: 8, providedTags: ['worker:class:large'] });
    const light = await sbuild('armel');
    expect(await stateOf(light)).toEqual({ status: 'ASSIGNED', worker: 'place-armel-8g' });
    await t.sql(`update work_request set status = 'ABORTED' where id = ?`, [light]); // both free again
    const heavy = await sbuild('armel', { requiredTags: ['worker:class:large'] });
    expect(await stateOf(heavy)).toEqual({ status: 'ASSIGNED', worker: 'place-armel-64g' });
  });

  it('keeps an exclusive worker for the work it requires', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/security" }) { __typename } }`);
    await worker('place-mips-exclusive', 'mips64el', { requiredTags: ['task:workspace:debian:security'] });
    const foreign = await sbuild('mips64el');
    expect(await stateOf(foreign)).toEqual({ status: 'PENDING', worker: null });
    const own = await sbuild('mips64el', { workspace: 'debian/security' });
    expect(await stateOf(own)).toEqual({ status: 'ASSIGNED', worker: 'place-mips-exclusive' });
  });

  it('publishes the assignment to the worker and as a work request change', async () => {
    await worker('place-riscv', 'riscv64');
    const seen: { topic: string; id: number; status?: string }[] = [];
    const workerId = Number((await t.sql<{ id: number }>(`select id from worker where name = 'place-riscv'`))[0].id);
    const assigned = t.app.events.subscribe('workAssigned', String(workerId))[Symbol.asyncIterator]();
    const changed = t.app.events.subscribe('workRequestChanged')[Symbol.asyncIterator]();
    const firstAssigned = assigned.next(); // subscribes
    const firstChanged = changed.next();
    await t.app.events.listening?.();
    const id = await sbuild('riscv64');
    const a = await firstAssigned;
    seen.push({ topic: 'workAssigned', id: a.value.workRequestId });
    // Published once, as ASSIGNED: the next change heard is of the next request (events keep their order).
    const next = await sbuild('sparc64');
    for (const c of [await firstChanged, await changed.next()])
      seen.push({ topic: 'workRequestChanged', id: c.value.id, status: c.value.status });
    await assigned.return?.();
    await changed.return?.();
    expect(seen).toEqual([
      { topic: 'workAssigned', id: Number(id) },
      { topic: 'workRequestChanged', id: Number(id), status: 'ASSIGNED' },
      { topic: 'workRequestChanged', id: Number(next), status: 'PENDING' },
    ]);
  });
});
