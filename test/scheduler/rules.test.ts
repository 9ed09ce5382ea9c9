/**
 * The scheduling rules of docs/design.md: tags and provenance, scheduler and provisioning demand, one table per rule, through the public surface:
 * workers register and report over GraphQL, requests are submitted over GraphQL, and the answers
 * are read from requestWork, explicit passes, candidateWorkers, diagnosis and provisioningDemand.
 */
import { beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  createPool,
  createUser,
  createWorkspace,
  ERROR_FIELDS,
  expectResult,
  ok,
  registerWorker,
  reportMetadata,
  submit,
  submitOk,
} from '../helpers/fixtures.js';
import { resetScheduling } from '../helpers/scheduler-fixtures.js';
import { FAIR_QUANTUM_MS } from '../../src/scheduler/rules/queue-order.js';
import { intArray } from '../../src/storage/db/arrays.js';

const t = useTestApp();

type Json = Record<string, any>;

const GIB = 1024 ** 3;

/** What an agent on a machine of that architecture reports. */
const metadata = (arch = 'amd64', extra: Json = {}): Json => ({
  architectures: [arch],
  cpuCount: 4,
  totalPhysicalMemory: 8 * GIB,
  diskFree: 60 * GIB,
  executors: ['unshare'],
  tools: ['sbuild'],
  tasks: [
    { type: 'worker', name: 'sbuild', version: 1 },
    { type: 'worker', name: 'noop', version: 1 },
  ],
  ...extra,
});

/** Registers a worker, reports its metadata (so it is connected) and returns its token. */
async function worker(
  name: string,
  opts: {
    arch?: string;
    concurrency?: number;
    type?: string;
    pool?: string;
    requiredTags?: string[];
    meta?: Json;
  } = {},
): Promise<string> {
  const token = await registerWorker(t, name, {
    concurrency: opts.concurrency,
    type: opts.type,
    pool: opts.pool,
    staticMetadata: opts.requiredTags ? { requiredTags: opts.requiredTags } : undefined,
  });
  await reportMetadata(t, token, metadata(opts.arch, opts.meta));
  return token;
}

const sbuildOf = (arch: string, extra: Json = {}): Json => ({
  workspace: 'debian/main',
  taskType: 'worker',
  taskName: 'sbuild',
  taskData: { source_package: 'hello', host_architecture: arch },
  ...extra,
});
const noop = (extra: Json = {}): Json => ({
  workspace: 'debian/main',
  taskType: 'worker',
  taskName: 'noop',
  taskData: {},
  ...extra,
});

/** Submits as admin and returns the id. */
async function queue(input: Json): Promise<string> {
  return (await submitOk(t, input)).id as string;
}

const REQUEST_WORK = `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } ... on Error { code message path } } }`;

/** A worker pulls: the id it got, or null. */
async function pull(token: string): Promise<string | null> {
  const data = await ok(t, REQUEST_WORK, {}, token);
  expect(data.requestWork.__typename).toBe('RequestWorkPayload');
  return data.requestWork.workRequest?.id ?? null;
}

async function complete(id: string, token: string): Promise<void> {
  const data = await ok(
    t,
    `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename ${ERROR_FIELDS} } }`,
    { id },
    token,
  );
  expect(data.completeWorkRequest.__typename).toBe('WorkRequest');
}

/** The worker names that could run a request (all that match, or the available ones). */
async function candidates(id: string, availableOnly = false): Promise<string[]> {
  const data = await ok(
    t,
    `query($ids: [ID!]!, $a: Boolean) { candidateWorkers(workRequestIds: $ids, availableOnly: $a) { workerNames } }`,
    { ids: [id], a: availableOnly },
  );
  return data.candidateWorkers[0].workerNames as string[];
}

/** Who holds which request now, from the table itself. */
async function holders(): Promise<Record<string, string>> {
  const rows = await t.sql<{ id: number; name: string }>(
    `select r.id, w.name from work_request r join worker w on w.id = r.worker_id where r.status in ('ASSIGNED', 'RUNNING')`,
  );
  return Object.fromEntries(rows.map((r) => [String(r.id), r.name]));
}

async function statusOf(id: string): Promise<string> {
  const [row] = await t.sql<{ status: string }>('select status from work_request where id = ?', [Number(id)]);
  return row.status;
}

const adminSwitch = (mutation: 'drainWorker' | 'undrainWorker' | 'disableWorker' | 'enableWorker', name: string) =>
  expectResult(
    t,
    'Worker',
    `mutation($n: String!) { ${mutation}(input: { name: $n }) { __typename ${ERROR_FIELDS} } }`,
    { n: name },
  );

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  await createWorkspace(t, 'debian/security');
});

beforeEach(async () => {
  await resetScheduling(t);
});

describe('order: effective priority, then fair key, then oldest, then id', () => {
  // Each request: [priorityBase, priorityAdjustment, seconds after a common creation time]; the expected order by index.
  // Each is dated as if submitted at that time to a workspace with nothing queued: its creation time and its
  // fair key (the workspace's clock, scheduler/rules/queue-order.ts) both at that second.
  const cases: { name: string; requests: [number, number, number][]; order: number[] }[] = [
    {
      name: 'higher priority first',
      requests: [
        [0, 0, 0],
        [5, 0, 1],
        [1, 0, 2],
      ],
      order: [1, 2, 0],
    },
    {
      name: 'same priority: oldest first',
      requests: [
        [0, 0, 2],
        [0, 0, 0],
        [0, 0, 1],
      ],
      order: [1, 2, 0],
    },
    {
      name: 'same priority and age: lowest id first',
      requests: [
        [0, 0, 0],
        [0, 0, 0],
        [0, 0, 0],
      ],
      order: [0, 1, 2],
    },
    {
      name: 'the effective priority is base + adjustment',
      requests: [
        [5, -5, 0],
        [0, 0, 1],
        [1, 3, 2],
      ],
      order: [2, 0, 1],
    },
    {
      name: 'priority beats age, age beats id',
      requests: [
        [1, 0, 9],
        [2, 0, 9],
        [1, 0, 3],
        [2, 0, 9],
      ],
      order: [1, 3, 2, 0],
    },
  ];
  for (const via of ['requestWork', 'runPass'] as const) {
    it.each(cases)(`${via}: $name`, async ({ requests, order }) => {
      const token = await worker('solo');
      const ids: string[] = [];
      for (const [priorityBase, priorityAdjustment] of requests)
        ids.push(await queue(noop({ priorityBase, priorityAdjustment })));
      for (const [i, [, , seconds]] of requests.entries()) {
        await t.sql(
          `update work_request set created_at = '2026-01-01T00:00:00Z'::timestamptz + make_interval(secs => ?),
                                   fair_key = (extract(epoch from '2026-01-01T00:00:00Z'::timestamptz + make_interval(secs => ?)) * 1000)::bigint where id = ?`,
          [seconds, seconds, Number(ids[i])],
        );
      }
      const got: string[] = [];
      for (let i = 0; i < requests.length; i++) {
        const id =
          via === 'requestWork'
            ? await pull(token)
            : String((await t.app.scheduler.runPass())[0]?.workRequestId ?? null);
        got.push(id!);
        await complete(id!, token);
      }
      expect(got).toEqual(order.map((i) => ids[i]));
    });
  }
});

/** Submits n noop requests to a workspace in one createWorkRequests call; their ids in input order. */
async function batch(workspace: string, n: number): Promise<string[]> {
  const data = await ok(
    t,
    `mutation($input: CreateWorkRequestsInput!) { createWorkRequests(input: $input) { __typename ... on CreateWorkRequestsPayload { requests { id } } ${ERROR_FIELDS} } }`,
    { input: { requests: Array.from({ length: n }, () => noop({ workspace })) } },
  );
  expect(data.createWorkRequests.__typename).toBe('CreateWorkRequestsPayload');
  return data.createWorkRequests.requests.map((r: Json) => r.id as string);
}

/**
 * Runs `fn` with the process's Date (which the service reads when it keys a submission) set by `at(ms)`
 * to that many milliseconds after the start; timers run as usual. Real time again afterwards.
 */
async function withClock<T>(fn: (at: (ms: number) => void) => Promise<T>): Promise<T> {
  const start = Date.now();
  vi.useFakeTimers({ toFake: ['Date'] });
  try {
    return await fn((ms) => vi.setSystemTime(start + ms));
  } finally {
    vi.useRealTimers();
  }
}

describe('fair share: a workspace submitting later is served interleaved with another backlog at equal priority', () => {
  // Workspace A (debian/main) queues a backlog first; B (debian/security) submits later, same priority.
  // With `slots` free slots, how many of B's requests get one, and where in the order.
  const cases: { name: string; backlog: number; later: number; slots: number; bServed: number }[] = [
    { name: 'one request of B against 20 of A, 4 slots', backlog: 20, later: 1, slots: 4, bServed: 1 },
    { name: '5 of B against 30 of A, 6 slots: half each', backlog: 30, later: 5, slots: 6, bServed: 3 },
    { name: '10 of B against 40 of A, 10 slots: half each', backlog: 40, later: 10, slots: 10, bServed: 5 },
    { name: '3 of B against 40 of A, 10 slots: all of B', backlog: 40, later: 3, slots: 10, bServed: 3 },
  ];
  it.each(cases)('runPass: $name', async ({ backlog, later, slots, bServed }) => {
    await worker('big', { concurrency: slots });
    // The keys are a quantum (1 s) apart: B's first key falls right after A's first when B submits within
    // it. The submissions' clock is set, so that a slow machine does not move B out of that quantum.
    const { a, b } = await withClock(async (at) => {
      at(0);
      const a = await batch('debian/main', backlog);
      at(FAIR_QUANTUM_MS / 2);
      return { a, b: await batch('debian/security', later) };
    });
    expect(a).toHaveLength(backlog);
    expect(b).toHaveLength(later);
    const assigned = (await t.app.scheduler.runPass()).map((x) => String(x.workRequestId));
    expect(assigned).toHaveLength(slots);
    const fromB = assigned.filter((id) => b.includes(id));
    expect(fromB).toHaveLength(bServed);
    // Each workspace's own requests in submission order: the first of A and the first of B.
    expect(assigned.filter((id) => a.includes(id))).toEqual(a.slice(0, slots - bServed));
    expect(fromB).toEqual(b.slice(0, bServed));
  });

  it('requestWork: the second pull gets B’s request, not the rest of A’s backlog', async () => {
    const token = await worker('solo');
    const { a, fromB } = await withClock(async (at) => {
      at(0);
      const a = await batch('debian/main', 10);
      at(FAIR_QUANTUM_MS / 2);
      return { a, fromB: await queue(noop({ workspace: 'debian/security' })) };
    });
    const got: string[] = [];
    for (let i = 0; i < 3; i++) {
      got.push((await pull(token))!);
      await complete(got[i], token);
    }
    expect(got).toEqual([a[0], fromB, a[1]]);
  });

  it('concurrent creates into one workspace with a backlog get distinct keys a quantum apart, and a refused create takes none', async () => {
    // The submissions' clock is set: on a slow machine a second passing would move the workspace's clock on by itself.
    const { ids, refused } = await withClock(async (at) => {
      at(0);
      const backlog = await queue(noop()); // the clock runs on from it
      const refused = await queue(noop({ dependsOn: ['999999'] })).then(
        () => 'created',
        () => 'refused',
      );
      return { ids: [backlog, ...(await Promise.all(Array.from({ length: 12 }, () => queue(noop()))))], refused };
    });
    expect(refused).toBe('refused');
    const keys = (
      await t.sql<{ fair_key: string }>(
        `select fair_key::text from work_request where id = any(?::int[]) order by fair_key`,
        [intArray(ids.map(Number))],
      )
    ).map((r) => Number(r.fair_key));
    expect(new Set(keys).size).toBe(13);
    for (let i = 1; i < keys.length; i++) expect(keys[i] - keys[i - 1]).toBe(FAIR_QUANTUM_MS); // no gap: the refused one took no key
  });

  it('a higher priority still comes first, whatever the workspace', async () => {
    const token = await worker('solo');
    const high = await queue(noop({ workspace: 'debian/main', priorityBase: 1 }));
    await queue(noop({ workspace: 'debian/security' }));
    for (let i = 0; i < 3; i++) await queue(noop({ workspace: 'debian/main', priorityBase: 1 }));
    expect(await pull(token)).toBe(high);
  });
});

describe('skipping: a request nobody can run does not block the ones behind it', () => {
  it.each(['requestWork', 'runPass'] as const)(
    '%s: an arm64 request of priority 100 does not stop amd64 work',
    async (via) => {
      const token = await worker('amd');
      const blocked = await queue(sbuildOf('arm64', { priorityBase: 100 }));
      const low = await queue(sbuildOf('amd64', { priorityBase: -5 }));
      const got =
        via === 'requestWork' ? await pull(token) : String((await t.app.scheduler.runPass())[0]?.workRequestId);
      expect(got).toBe(low);
      expect(await statusOf(blocked)).toBe('PENDING');
    },
  );

  it('a request only a busy worker can run does not stop another worker from taking the next one', async () => {
    const arm = await worker('arm', { arch: 'arm64' });
    const amd = await worker('amd');
    const armJob1 = await queue(sbuildOf('arm64', { priorityBase: 10 }));
    const armJob2 = await queue(sbuildOf('arm64', { priorityBase: 9 }));
    const anyJob = await queue(noop({ priorityBase: 1 }));
    expect(await pull(arm)).toBe(armJob1);
    // armJob2 heads the queue but only the busy arm worker can run it: amd takes the next one it can.
    expect(await pull(amd)).toBe(anyJob);
    expect(await statusOf(armJob2)).toBe('PENDING');
    await complete(armJob1, arm);
    expect(await pull(arm)).toBe(armJob2);
  });
});

describe('capacity and concurrency: a worker never holds more than its concurrency', () => {
  it.each([1, 2, 3])('concurrency %i, pulled one call after another', async (concurrency) => {
    const token = await worker('w', { concurrency });
    for (let i = 0; i < 5; i++) await queue(noop());
    const got: (string | null)[] = [];
    for (let i = 0; i < concurrency + 2; i++) got.push(await pull(token));
    expect(got.filter(Boolean)).toHaveLength(concurrency);
    expect(got.slice(concurrency)).toEqual([null, null]);
    expect(await t.app.scheduler.runPass()).toEqual([]);
    // A finished request frees exactly one slot.
    await complete(got[0]!, token);
    expect(await t.app.scheduler.runPass()).toHaveLength(1);
    expect(await pull(token)).toBeNull();
  });

  it('concurrency 3, ten calls at once: three assignments, all different', async () => {
    const token = await worker('w', { concurrency: 3 });
    for (let i = 0; i < 10; i++) await queue(noop());
    const got = await Promise.all(Array.from({ length: 10 }, () => pull(token)));
    const ids = got.filter((g): g is string => g !== null);
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(3);
    expect(Object.values(await holders())).toEqual(['w', 'w', 'w']);
  });

  it('a pass fills every free slot and no more', async () => {
    await worker('one', { concurrency: 1 });
    await worker('three', { concurrency: 3 });
    for (let i = 0; i < 10; i++) await queue(noop());
    expect(await t.app.scheduler.runPass()).toHaveLength(4);
    const held = Object.values(await holders());
    expect(held.filter((n) => n === 'one')).toHaveLength(1);
    expect(held.filter((n) => n === 'three')).toHaveLength(3);
    expect(await t.app.scheduler.runPass()).toEqual([]);
  });
});

describe('drain: a draining worker finishes what it runs and receives nothing new', () => {
  it('gets nothing from requestWork or a pass, still completes its work, and gets work again once undrained', async () => {
    const token = await worker('w', { concurrency: 2 });
    const first = await queue(noop({ priorityBase: 1 }));
    const second = await queue(noop());
    expect(await pull(token)).toBe(first);
    await adminSwitch('drainWorker', 'w');
    expect(await pull(token)).toBeNull();
    expect(await t.app.scheduler.runPass()).toEqual([]);
    expect(await candidates(second, true)).toEqual([]);
    const diagnosis = await ok(
      t,
      `query($id: ID!) { workRequest(id: $id) { diagnosis { state unavailableWorkers { reason count } } } }`,
      { id: second },
    );
    expect(diagnosis.workRequest.diagnosis).toEqual({
      state: 'WAITING_FOR_WORKERS',
      unavailableWorkers: [{ reason: 'DRAINING', count: 1 }],
    });
    const started = await ok(
      t,
      `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`,
      { id: first },
      token,
    );
    expect(started.startWorkRequest.__typename).toBe('WorkRequest');
    await complete(first, token);
    expect(await pull(token)).toBeNull();
    await adminSwitch('undrainWorker', 'w');
    expect(await pull(token)).toBe(second);
  });

  it.each([
    ['drainWorker', 'DRAINING'],
    ['disableWorker', 'DISABLED'],
  ] as const)('after %s, the pass leaves its requests pending (%s)', async (mutation, reason) => {
    await worker('w');
    const id = await queue(noop());
    await adminSwitch(mutation, 'w');
    expect(await t.app.scheduler.runPass()).toEqual([]);
    const data = await ok(
      t,
      `query($id: ID!) { workRequest(id: $id) { diagnosis { state unavailableWorkers { reason } } } }`,
      { id },
    );
    expect(data.workRequest.diagnosis).toEqual({ state: 'WAITING_FOR_WORKERS', unavailableWorkers: [{ reason }] });
  });
});

describe('exclusivity: a worker that requires task:workspace:debian:security runs only that workspace', () => {
  const SECURITY = 'task:workspace:debian:security';
  const makeExclusive = {
    'registered before the tasks are queued': { before: true, after: async () => {} },
    'registered after the tasks are queued (they are re-classified)': {
      before: false,
      after: async () => void (await worker('sec', { requiredTags: [SECURITY] })),
    },
    'made exclusive after the tasks are queued (static metadata)': {
      before: false,
      after: async () => {
        await worker('sec');
        await expectResult(
          t,
          'Worker',
          `mutation($i: SetWorkerStaticMetadataInput!) { setWorkerStaticMetadata(input: $i) { __typename ${ERROR_FIELDS} } }`,
          {
            i: { name: 'sec', metadata: { requiredTags: [SECURITY] } },
          },
        );
      },
    },
  };
  it.each(Object.entries(makeExclusive))('%s', async (_name, { before, after }) => {
    if (before) await worker('sec', { requiredTags: [SECURITY] });
    const main = [await queue(noop({ priorityBase: 10 })), await queue(noop({ priorityBase: 10 }))];
    const security = [
      await queue(noop({ workspace: 'debian/security' })),
      await queue(noop({ workspace: 'debian/security' })),
    ];
    await after();
    expect(await candidates(main[0])).toEqual([]);
    expect(await candidates(security[0])).toEqual(['sec']);
    // A general worker may run both; the exclusive one only the security tasks, whatever their priority.
    await worker('general');
    expect(await candidates(security[0])).toEqual(['general', 'sec']);
    await t.sql(`update worker set concurrency = 3 where name = 'sec'`);
    expect((await t.app.scheduler.runPass()).length).toBeGreaterThan(0);
    const held = await holders();
    expect(
      Object.entries(held)
        .filter(([, w]) => w === 'sec')
        .map(([id]) => id)
        .sort(),
    ).toEqual([...security].sort());
    expect(held[main[0]]).toBe('general');
  });

  it('a request taken back from another worker after the exclusive worker appeared goes to it', async () => {
    const general = await worker('general');
    const id = await queue(noop({ workspace: 'debian/security' }));
    expect(await pull(general)).toBe(id);
    const token = await worker('sec', { requiredTags: [SECURITY] });
    const released = await ok(
      t,
      `mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "no handler" }) { __typename ${ERROR_FIELDS} } }`,
      { id },
      general,
    );
    expect(released.releaseWorkRequest.__typename).toBe('WorkRequest');
    await adminSwitch('drainWorker', 'general');
    expect(await candidates(id, true)).toEqual(['sec']);
    expect(await pull(token)).toBe(id);
  });

  it('the exclusive worker pulling gets a security task though main work has a higher priority, then nothing', async () => {
    await queue(noop({ priorityBase: 50 }));
    const security = await queue(noop({ workspace: 'debian/security' }));
    const token = await worker('sec', { requiredTags: [SECURITY], concurrency: 2 });
    expect(await pull(token)).toBe(security);
    expect(await pull(token)).toBeNull();
  });
});

describe('orchestrated tasks: internal and workflow tasks are run by the server, never assigned to a worker', () => {
  // Until issue 12 these stayed PENDING forever (and their dependents BLOCKED); now the server runs
  // them at once (test/workflows/ follows them through to the end with real agents).
  beforeAll(async () => {
    await ok(t, `mutation { createEnvironment(input: { codename: "trixie", architecture: "amd64" }) { __typename } }`);
  });
  const QUESTIONS = `query($id: ID!) { workRequest(id: $id) { status result diagnosis { state matchingWorkers mismatches { workerNames } } children { edges { node { id taskName status } } } } provisioningDemand { pendingTotal unschedulable { count } } }`;

  it('internal: a synchronization point with nothing to wait for is COMPLETED at once; no worker of any type gets it', async () => {
    const tokens = [
      await worker('plain'),
      await worker('server', { type: 'SERVER' }),
      await worker('na', { type: 'NOT_ASSIGNABLE' }),
    ];
    const id = await queue({
      workspace: 'debian/main',
      taskType: 'internal',
      taskName: 'synchronization_point',
      taskData: { step: 'done' },
    });
    for (const token of tokens) expect(await pull(token)).toBeNull();
    expect(await t.app.scheduler.runPass()).toEqual([]);
    expect(await candidates(id)).toEqual([]);
    const data = await ok(t, QUESTIONS, { id });
    expect(data.workRequest).toEqual({
      status: 'COMPLETED',
      result: 'SUCCESS',
      diagnosis: { state: 'ORCHESTRATED', matchingWorkers: 0, mismatches: [] },
      children: { edges: [] },
    });
    expect(data.provisioningDemand).toEqual({ pendingTotal: 0, unschedulable: [] });
  });

  it('workflow: it is RUNNING through its children, which workers get; no worker of any type gets the workflow itself', async () => {
    const tokens = {
      plain: await worker('plain'),
      server: await worker('server', { type: 'SERVER' }),
      na: await worker('na', { type: 'NOT_ASSIGNABLE' }),
    };
    const id = await queue({
      workspace: 'debian/main',
      taskType: 'workflow',
      taskName: 'sbuild',
      taskData: { input: { source_package: 'hello' }, target_distribution: 'debian:trixie', architectures: ['amd64'] },
    });
    const data = await ok(t, QUESTIONS, { id });
    const [child] = data.workRequest.children.edges.map((e: Json) => e.node);
    expect(data.workRequest).toMatchObject({
      status: 'RUNNING',
      result: null,
      diagnosis: { state: 'ORCHESTRATED', matchingWorkers: 0, mismatches: [] },
    });
    expect(child).toMatchObject({ taskName: 'sbuild', status: 'PENDING' });
    expect(data.provisioningDemand).toEqual({ pendingTotal: 1, unschedulable: [] }); // the child, not the workflow
    expect(await candidates(id)).toEqual([]);
    expect(await candidates(child.id)).toEqual(['plain']);
    expect(await pull(tokens.server)).toBeNull();
    expect(await pull(tokens.na)).toBeNull();
    expect(await pull(tokens.plain)).toBe(child.id);
    expect(await statusOf(id)).toBe('RUNNING');
  });
});

describe('server and signing tasks go only to server and signing workers', () => {
  const FINGERPRINT = 'A'.repeat(40);
  const cases = [
    {
      name: 'servernoop',
      input: { workspace: 'debian/main', taskType: 'server', taskName: 'servernoop', taskData: {} },
      runsOn: 'server',
    },
    {
      name: 'debsign',
      input: {
        workspace: 'debian/main',
        taskType: 'signing',
        taskName: 'debsign',
        taskData: { unsigned: 1, key: FINGERPRINT },
      },
      runsOn: 'signing',
    },
    { name: 'noop (a worker task)', input: noop(), runsOn: 'plain' },
  ];
  it.each(cases)('$name runs on the $runsOn worker only', async ({ input, runsOn }) => {
    const tokens: Record<string, string> = {
      plain: await worker('plain', { meta: { tools: ['sbuild', 'debsign'] } }),
      server: await worker('server', {
        type: 'SERVER',
        meta: {
          tasks: [
            { type: 'server', name: 'servernoop', version: 1 },
            { type: 'worker', name: 'noop', version: 1 },
          ],
        },
      }),
      signing: await worker('signing', {
        type: 'SIGNING',
        meta: {
          tools: ['debsign'],
          tasks: [
            { type: 'signing', name: 'debsign', version: 1 },
            { type: 'worker', name: 'noop', version: 1 },
          ],
        },
      }),
    };
    const id = await queue(input);
    expect(await candidates(id)).toEqual([runsOn]);
    for (const [name, token] of Object.entries(tokens)) if (name !== runsOn) expect(await pull(token)).toBeNull();
    expect(await pull(tokens[runsOn])).toBe(id);
  });
});

describe('valued tags: worker:memory-gib>=8', () => {
  it.each([
    { memoryGib: 4, runs: false },
    { memoryGib: 8, runs: true },
    { memoryGib: 16, runs: true },
  ])('a worker with $memoryGib GiB: runs it = $runs', async ({ memoryGib, runs }) => {
    const token = await worker('w', { meta: { totalPhysicalMemory: memoryGib * GIB } });
    const id = await queue(noop({ requiredTags: ['worker:memory-gib>=8'] }));
    expect(await candidates(id)).toEqual(runs ? ['w'] : []);
    expect(await pull(token)).toBe(runs ? id : null);
    if (!runs) {
      const data = await ok(
        t,
        `query($id: ID!) { workRequest(id: $id) { diagnosis { state mismatches { workerNames missingOnWorker missingOnTask } } } }`,
        { id },
      );
      expect(data.workRequest.diagnosis).toEqual({
        state: 'UNSCHEDULABLE',
        mismatches: [{ workerNames: ['w'], missingOnWorker: ['worker:memory-gib>=8'], missingOnTask: [] }],
      });
    }
  });

  it('among several workers, exactly those at or above the minimum', async () => {
    for (const gib of [2, 7, 8, 9, 64])
      await worker(`mem-${String(gib).padStart(2, '0')}`, { meta: { totalPhysicalMemory: gib * GIB } });
    const id = await queue(noop({ requiredTags: ['worker:memory-gib>=8'] }));
    expect(await candidates(id)).toEqual(['mem-08', 'mem-09', 'mem-64']);
  });
});

const DEMAND = `{ provisioningDemand { pendingTotal
  pools { pool { name } pendingRunnable pendingAssigned idleCompatibleSlots workersRequired activeInstances launch limitedBy stopWorkers { name } }
  unschedulable { count sampleWorkRequestIds requiredTags nearest { pool workerNames missingOnWorker missingOnTask } } } }`;

const RISCV_POOL = {
  name: 'cloud-riscv',
  providedTags: [
    'worker:build-arch:riscv64',
    'worker:executor:unshare',
    'worker:cap:sbuild',
    'worker:task:worker:sbuild:version:1',
  ],
};

describe('pools: demand scales from zero, within the limits, and stops idle instances', () => {
  it.each([
    { pending: 2, maxActiveInstances: 3, launch: 2, limitedBy: [] },
    { pending: 3, maxActiveInstances: 3, launch: 3, limitedBy: [] },
    { pending: 10, maxActiveInstances: 3, launch: 3, limitedBy: ['MAX_ACTIVE_INSTANCES'] },
  ])(
    'a pool with no instance and $pending requests only it can run: launch $launch',
    async ({ pending, maxActiveInstances, launch, limitedBy }) => {
      await createPool(t, { ...RISCV_POOL, maxActiveInstances });
      await worker('amd'); // can run none of them
      for (let i = 0; i < pending; i++) await queue(sbuildOf('riscv64'));
      await queue(sbuildOf('amd64')); // the static worker's, not the pool's
      const { provisioningDemand: d } = await ok(t, DEMAND);
      expect(d.pendingTotal).toBe(pending + 1);
      expect(d.pools).toEqual([
        {
          pool: { name: 'cloud-riscv' },
          pendingRunnable: pending,
          pendingAssigned: pending,
          idleCompatibleSlots: 0,
          workersRequired: pending,
          activeInstances: 0,
          launch,
          limitedBy,
          stopWorkers: [],
        },
      ]);
      expect(d.unschedulable).toEqual([]);
    },
  );

  it('a pool whose instances are busy launches for what is left, counting them against the maximum', async () => {
    await createPool(t, { ...RISCV_POOL, maxActiveInstances: 3 });
    const token = await worker('riscv-1', { pool: 'cloud-riscv', arch: 'riscv64' });
    for (let i = 0; i < 5; i++) await queue(sbuildOf('riscv64'));
    expect(await pull(token)).not.toBeNull();
    const { provisioningDemand: d } = await ok(t, DEMAND);
    expect(d.pools[0]).toMatchObject({
      pendingRunnable: 4,
      pendingAssigned: 4,
      activeInstances: 1,
      workersRequired: 4,
      launch: 2,
      limitedBy: ['MAX_ACTIVE_INSTANCES'],
    });
  });

  it('idle pool instances past idleTimeoutSeconds are to stop; recent ones, and ones pending work needs, are kept', async () => {
    await createPool(t, { ...RISCV_POOL, idleTimeoutSeconds: 60 });
    await worker('riscv-old', { pool: 'cloud-riscv', arch: 'riscv64' });
    await worker('riscv-new', { pool: 'cloud-riscv', arch: 'riscv64' });
    await t.sql(
      `update worker set instance_created_at = now() - interval '1 hour', registered_at = now() - interval '1 hour' where name = 'riscv-old'`,
    );
    let { provisioningDemand: d } = await ok(t, DEMAND);
    expect(d.pools[0]).toMatchObject({ launch: 0, activeInstances: 2, stopWorkers: [{ name: 'riscv-old' }] });

    // minIdleInstances keeps that many idle, the oldest are stopped first.
    await expectResult(
      t,
      'WorkerPool',
      `mutation { updateWorkerPool(input: { name: "cloud-riscv", minIdleInstances: 2 }) { __typename ${ERROR_FIELDS} } }`,
    );
    ({ provisioningDemand: d } = await ok(t, DEMAND));
    expect(d.pools[0].stopWorkers).toEqual([]);
    await expectResult(
      t,
      'WorkerPool',
      `mutation { updateWorkerPool(input: { name: "cloud-riscv", minIdleInstances: 0 }) { __typename ${ERROR_FIELDS} } }`,
    );

    // Pending work for both instances: the old one is idle capacity that serves it, not one to stop.
    await queue(sbuildOf('riscv64'));
    await queue(sbuildOf('riscv64'));
    ({ provisioningDemand: d } = await ok(t, DEMAND));
    expect(d.pools[0]).toMatchObject({ pendingRunnable: 2, pendingAssigned: 0, launch: 0, idleCompatibleSlots: 2 });
    expect(d.pools[0].stopWorkers).toEqual([]);
  });

  it('a disabled pool is left out of the demand; what only it could run is unschedulable', async () => {
    await createPool(t, { ...RISCV_POOL, enabled: false });
    const id = await queue(sbuildOf('riscv64'));
    const { provisioningDemand: d } = await ok(t, DEMAND);
    expect(d.pools).toEqual([]);
    expect(d.unschedulable).toMatchObject([{ count: 1, sampleWorkRequestIds: [id] }]);
  });
});

describe('pools: what one pool cannot take goes to the next; static workers serve first', () => {
  const SHARE = `{ provisioningDemand { pools { pool { name } pendingAssigned workersRequired launch limitedBy degraded lastError monthRuntimeSeconds stopWorkers { name } } } }`;
  const shares = async () =>
    Object.fromEntries(
      ((await ok(t, SHARE)).provisioningDemand.pools as Json[]).map((p) => [
        p.pool.name,
        { assigned: p.pendingAssigned, required: p.workersRequired, launch: p.launch, limitedBy: p.limitedBy },
      ]),
    );
  const riscvPool = (name: string, extra: Json = {}) => createPool(t, { ...RISCV_POOL, name, ...extra });
  const queueRiscv = async (n: number) => {
    for (let i = 0; i < n; i++) await queue(sbuildOf('riscv64'));
  };

  it.each([
    {
      label: 'A capped at 3: B is asked for the other 7',
      a: { maxActiveInstances: 3 },
      b: {},
      pending: 10,
      expected: { a: [3, 3, 3, ['MAX_ACTIVE_INSTANCES']], b: [7, 7, 7, []] },
    },
    {
      label: 'A has room for all: B gets none',
      a: {},
      b: {},
      pending: 4,
      expected: { a: [4, 4, 4, []], b: [0, 0, 0, []] },
    },
    {
      label: 'neither has room for all: what is left stays with the first',
      a: { maxActiveInstances: 3 },
      b: { maxActiveInstances: 5 },
      pending: 10,
      expected: { a: [5, 5, 3, ['MAX_ACTIVE_INSTANCES']], b: [5, 5, 5, ['MAX_ACTIVE_INSTANCES']] },
    },
    {
      label: 'A disabled: B takes everything',
      a: { enabled: false },
      b: {},
      pending: 6,
      expected: { b: [6, 6, 6, []] },
    },
    {
      label: 'A over its monthly budget: B takes everything',
      a: { monthlyRuntimeBudgetSeconds: 0 },
      b: {},
      pending: 6,
      expected: { a: [0, 0, 0, ['MONTHLY_BUDGET']], b: [6, 6, 6, []] },
    },
    {
      label: 'concurrency 4 in A capped at 2 instances: 8 slots, B the other 2',
      a: { maxActiveInstances: 2, specifications: { concurrency: 4 } },
      b: {},
      pending: 10,
      expected: { a: [8, 2, 2, ['MAX_ACTIVE_INSTANCES']], b: [2, 2, 2, []] },
    },
    {
      label: 'concurrency 4: a third of the instances',
      a: { specifications: { concurrency: 4 } },
      b: {},
      pending: 10,
      expected: { a: [10, 3, 3, []], b: [0, 0, 0, []] },
    },
  ])('$label', async ({ a, b, pending, expected }) => {
    await riscvPool('a-riscv', a);
    await riscvPool('b-riscv', b);
    await queueRiscv(pending);
    const got = await shares();
    const want = Object.fromEntries(
      Object.entries(expected).map(([k, [assigned, required, launch, limitedBy]]) => [
        `${k}-riscv`,
        { assigned, required, launch, limitedBy },
      ]),
    );
    expect(got).toEqual(want);
  });

  it('a pool whose launches fail backs off: its share goes to the next, and it shows degraded after enough failures', async () => {
    await riscvPool('a-riscv');
    await riscvPool('b-riscv');
    await queueRiscv(5);
    await t.sql(
      `update worker_pool set launch_failures = 1, launch_retry_at = now() + interval '1 hour', last_error = 'quota exceeded', last_error_kind = 'quota', last_error_at = now() where name = 'a-riscv'`,
    );
    expect(await shares()).toEqual({
      'a-riscv': { assigned: 0, required: 0, launch: 0, limitedBy: ['BACKOFF'] },
      'b-riscv': { assigned: 5, required: 5, launch: 5, limitedBy: [] },
    });
    const degraded = async () =>
      ((await ok(t, SHARE)).provisioningDemand.pools as Json[]).map((p) => [p.pool.name, p.degraded, p.lastError]);
    expect(await degraded()).toEqual([
      ['a-riscv', false, 'quota exceeded'],
      ['b-riscv', false, null],
    ]);
    await t.sql(`update worker_pool set launch_failures = 3 where name = 'a-riscv'`);
    expect(await degraded()).toEqual([
      ['a-riscv', true, 'quota exceeded'],
      ['b-riscv', false, null],
    ]);
    // An error only an admin can cure shows at once.
    await t.sql(`update worker_pool set launch_failures = 1, last_error_kind = 'auth' where name = 'a-riscv'`);
    expect((await degraded())[0][1]).toBe(true);
    // Once the backoff is over, the pool tries again: its share comes back.
    await t.sql(`update worker_pool set launch_retry_at = now() - interval '1 second' where name = 'a-riscv'`);
    expect((await shares())['a-riscv']).toEqual({ assigned: 5, required: 5, launch: 5, limitedBy: [] });
  });

  it('free static workers serve before idle pool workers, which are then stopped after their idle timeout', async () => {
    await riscvPool('a-riscv', { idleTimeoutSeconds: 60 });
    // The pool worker sorts first by name: only the rule puts the static one first.
    await worker('a-pooled', { pool: 'a-riscv', arch: 'riscv64' });
    await worker('z-static', { arch: 'riscv64' });
    await t.sql(
      `update worker set instance_created_at = now() - interval '1 hour', registered_at = now() - interval '1 hour'`,
    );
    await queueRiscv(1);
    const { provisioningDemand: d } = await ok(t, SHARE);
    expect(d.pools[0]).toMatchObject({ pendingAssigned: 0, launch: 0, stopWorkers: [{ name: 'a-pooled' }] });
    // With two pending, both are needed: nothing to stop.
    await queueRiscv(1);
    expect((await ok(t, SHARE)).provisioningDemand.pools[0].stopWorkers).toEqual([]);
  });

  it("counts the month's runtime of the pool's instances against its budget", async () => {
    await riscvPool('a-riscv', { monthlyRuntimeBudgetSeconds: 3600 });
    const [{ id }] = await t.sql<{ id: number }>(`select id from worker_pool where name = 'a-riscv'`);
    const monthStart = `date_trunc('month', now() at time zone 'UTC') at time zone 'UTC'`;
    // Ran 20 minutes (or since the month began), still running; one that ended last month counts for nothing.
    await t.sql(
      `insert into instance (name, pool_id, state, requested_at, terminated_at) values
         ('a-riscv-now', ?, 'RUNNING', greatest(now() - interval '20 minutes', ${monthStart}), null),
         ('a-riscv-old', ?, 'TERMINATED', ${monthStart} - interval '3 days', ${monthStart} - interval '2 days')`,
      [id, id],
    );
    const [{ expected }] = await t.sql<{ expected: number }>(
      `select extract(epoch from now() - greatest(now() - interval '20 minutes', ${monthStart}))::float as expected`,
    );
    await queueRiscv(1);
    let pool = (await ok(t, SHARE)).provisioningDemand.pools[0];
    expect(pool.monthRuntimeSeconds).toBeGreaterThanOrEqual(expected);
    expect(pool.monthRuntimeSeconds).toBeLessThan(expected + 60);
    expect(pool).toMatchObject({ launch: 1, limitedBy: [] });
    await expectResult(
      t,
      'WorkerPool',
      `mutation { updateWorkerPool(input: { name: "a-riscv", monthlyRuntimeBudgetSeconds: 60 }) { __typename ${ERROR_FIELDS} } }`,
    );
    pool = (await ok(t, SHARE)).provisioningDemand.pools[0];
    expect(pool).toMatchObject({ launch: 0, limitedBy: ['MONTHLY_BUDGET'] });
    const { workerPool } = await ok(t, `{ workerPool(name: "a-riscv") { monthRuntimeSeconds } }`);
    expect(workerPool.monthRuntimeSeconds).toBeGreaterThanOrEqual(expected);
  });
});

describe('diagnosis: why a pending request waits', () => {
  const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { diagnosis { state matchingWorkers availableWorkers busyWorkers
    unavailableWorkers { reason count } matchingPools mismatches { pool workerNames missingOnWorker missingOnTask } } } }`;
  const cases: { state: string; setup: () => Promise<string>; expected: Json }[] = [
    {
      state: 'READY',
      setup: async () => (await worker('amd'), queue(sbuildOf('amd64'))),
      expected: {
        matchingWorkers: 1,
        availableWorkers: 1,
        busyWorkers: 0,
        unavailableWorkers: [],
        matchingPools: [],
        mismatches: [],
      },
    },
    {
      state: 'WAITING_FOR_CAPACITY',
      setup: async () => {
        const token = await worker('amd');
        await queue(sbuildOf('amd64', { priorityBase: 1 }));
        await pull(token);
        return queue(sbuildOf('amd64'));
      },
      expected: { matchingWorkers: 1, availableWorkers: 0, busyWorkers: 1, unavailableWorkers: [] },
    },
    {
      state: 'WAITING_FOR_WORKERS',
      setup: async () => {
        await worker('amd');
        await t.sql(`update worker set connected_at = null where name = 'amd'`);
        return queue(sbuildOf('amd64'));
      },
      expected: {
        matchingWorkers: 1,
        availableWorkers: 0,
        busyWorkers: 0,
        unavailableWorkers: [{ reason: 'DISCONNECTED', count: 1 }],
      },
    },
    {
      state: 'WAITING_FOR_PROVISIONING',
      setup: async () => {
        await createPool(t, RISCV_POOL);
        await worker('amd');
        return queue(sbuildOf('riscv64'));
      },
      expected: {
        matchingWorkers: 0,
        matchingPools: ['cloud-riscv'],
        mismatches: [
          { pool: null, workerNames: ['amd'], missingOnWorker: ['worker:build-arch:riscv64'], missingOnTask: [] },
        ],
      },
    },
    {
      state: 'UNSCHEDULABLE',
      setup: async () => {
        await worker('amd');
        await worker('sec', { requiredTags: ['task:workspace:debian:security'], arch: 'riscv64' });
        return queue(sbuildOf('riscv64'));
      },
      expected: {
        matchingWorkers: 0,
        matchingPools: [],
        mismatches: [
          { pool: null, workerNames: ['amd'], missingOnWorker: ['worker:build-arch:riscv64'], missingOnTask: [] },
          { pool: null, workerNames: ['sec'], missingOnWorker: [], missingOnTask: ['task:workspace:debian:security'] },
        ],
      },
    },
    {
      state: 'ORCHESTRATED',
      setup: async () => (
        await worker('amd'),
        queue({
          workspace: 'debian/main',
          taskType: 'internal',
          taskName: 'synchronization_point',
          taskData: { step: 's' },
        })
      ),
      expected: { matchingWorkers: 0, matchingPools: [], mismatches: [] },
    },
  ];
  it.each(cases)('$state', async ({ state, setup, expected }) => {
    const id = await setup();
    const data = await ok(t, DIAGNOSIS, { id });
    expect(data.workRequest.diagnosis).toMatchObject({ state, ...expected });
  });

  it('the demand lists unschedulable requests apart, with the nearest workers and the missing tags', async () => {
    await worker('amd');
    const id = await queue(sbuildOf('riscv64'));
    const { provisioningDemand: d } = await ok(t, DEMAND);
    expect(d.unschedulable).toEqual([
      {
        count: 1,
        sampleWorkRequestIds: [id],
        requiredTags: expect.arrayContaining(['worker:build-arch:riscv64']),
        nearest: [
          { pool: null, workerNames: ['amd'], missingOnWorker: ['worker:build-arch:riscv64'], missingOnTask: [] },
        ],
      },
    ]);
  });
});

describe('priorityAdjustment: raising a priority needs an admin', () => {
  const cases = [
    { who: 'a contributor', admin: false, adjustment: 5, allowed: false },
    { who: 'a contributor', admin: false, adjustment: 0, allowed: true },
    { who: 'a contributor', admin: false, adjustment: -5, allowed: true },
    { who: 'an admin user', admin: true, adjustment: 5, allowed: true },
  ];
  let n = 0;
  it.each(cases)('$who with adjustment $adjustment: allowed = $allowed', async ({ admin, adjustment, allowed }) => {
    const username = `prio-${n++}`;
    const token = await createUser(t, username, admin);
    await expectResult(
      t,
      'Workspace',
      `mutation($u: String!) { setWorkspaceMember(input: { workspace: "debian/main", username: $u, role: CONTRIBUTOR }) { __typename ${ERROR_FIELDS} } }`,
      { u: username },
    );
    const before = await t.sql<{ n: number }>('select count(*)::int as n from work_request');
    const res = await submit(t, noop({ priorityBase: 1, priorityAdjustment: adjustment }), token);
    if (allowed) {
      expect(res.__typename).toBe('WorkRequest');
      const [row] = await t.sql<{ p: number }>(
        'select priority_base + priority_adjustment as p from work_request where id = ?',
        [Number(res.id)],
      );
      expect(row.p).toBe(1 + adjustment);
    } else {
      expect(res).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
      expect(await t.sql('select count(*)::int as n from work_request')).toEqual(before);
    }
  });

  it('an admin adjustment moves a request ahead in the queue', async () => {
    const token = await worker('w');
    const first = await queue(noop({ priorityBase: 3 }));
    const raised = await queue(noop({ priorityBase: 0, priorityAdjustment: 4 }));
    expect(await pull(token)).toBe(raised);
    await complete(raised, token);
    expect(await pull(token)).toBe(first);
  });
});

describe('history is kept as requests complete, not read back from all of it', () => {
  /** A pool instance that has completed `durations` (seconds) of riscv64 sbuilds, then was drained. */
  async function instanceThatRan(name: string, durations: number[]): Promise<string> {
    const token = await worker(name, { pool: 'cloud-riscv', arch: 'riscv64' });
    for (const seconds of durations) {
      const id = await queue(sbuildOf('riscv64'));
      expect(await pull(token)).toBe(id);
      await t.sql(`update work_request set started_at = now() - make_interval(secs => ?) where id = ?`, [
        seconds,
        Number(id),
      ]);
      await complete(id, token);
    }
    return token;
  }

  it('demand estimates work from the last 30 days of durations of the same task', async () => {
    await createPool(t, { ...RISCV_POOL, maxActiveInstances: 20, targetLatencySeconds: 900 });
    await instanceThatRan('riscv-ran', [30, 90]);
    const rows = await t.sql<{ task_name: string; runs: number; seconds: number }>(
      `select task_name, runs, seconds from task_duration`,
    );
    // 30 + 90 seconds, plus the time between the test's update and each completion (a loaded machine takes some).
    expect(rows.map((r) => ({ task_name: r.task_name, runs: r.runs }))).toEqual([{ task_name: 'sbuild', runs: 2 }]);
    expect(rows[0].seconds).toBeGreaterThanOrEqual(120);
    expect(rows[0].seconds).toBeLessThan(130);
    // Older than 30 days: not counted, however long.
    await t.sql(
      `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', 'sbuild', current_date - 40, 5, 1000000)`,
    );
    await adminSwitch('drainWorker', 'riscv-ran'); // no idle capacity: the pool must start instances
    for (let i = 0; i < 10; i++) await queue(sbuildOf('riscv64'));
    const { provisioningDemand: d } = await ok(t, DEMAND);
    // 10 requests × 60 s on average = 600 s of work: one instance meets a 900 s target (600 s each
    // with no history: seven instances; with the old row counted, all twenty).
    expect(d.pools[0]).toMatchObject({ pendingAssigned: 10, workersRequired: 1 });
  });

  it('a pool instance is idle since its last completion', async () => {
    await createPool(t, { ...RISCV_POOL, idleTimeoutSeconds: 60 });
    await instanceThatRan('riscv-busy-until-now', [5]);
    await t.sql(
      `update worker set instance_created_at = now() - interval '1 hour', registered_at = now() - interval '1 hour' where name = 'riscv-busy-until-now'`,
    );
    let { provisioningDemand: d } = await ok(t, DEMAND);
    expect(d.pools[0].stopWorkers).toEqual([]); // registered an hour ago, but it just finished work
    const [{ last }] = await t.sql<{ last: string | null }>(
      `select last_completed_at as last from worker where name = 'riscv-busy-until-now'`,
    );
    expect(last).not.toBeNull();
    await t.sql(
      `update worker set last_completed_at = now() - interval '2 minutes' where name = 'riscv-busy-until-now'`,
    );
    ({ provisioningDemand: d } = await ok(t, DEMAND));
    expect(d.pools[0].stopWorkers).toEqual([{ name: 'riscv-busy-until-now' }]);
  });

  it('a completion reported twice counts once', async () => {
    await createPool(t, RISCV_POOL);
    const token = await instanceThatRan('riscv-twice', [10]);
    const [{ id }] = await t.sql<{ id: number }>(`select id from work_request where status = 'COMPLETED'`);
    await complete(String(id), token); // the same report again: the first answer was lost
    expect(await t.sql(`select runs from task_duration`)).toEqual([{ runs: 1 }]);
  });
});
