/**
 * Hostile input (issue 8, point 5 and point 8), through the public surface of the real app on
 * PostgreSQL: every probe gets a typed error (a result-union member for mutations, a GraphQL error
 * with a stable code for queries, a 4xx page for the status pages), never a 500 or a masked error,
 * and no row of any table changes. Inputs that are valid but large (twelve tags of 255 characters)
 * must succeed.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  ERROR_FIELDS,
  createPool,
  createUser,
  createWorkspace,
  memberOf,
  ok,
  registerWorker,
  sbuild,
  submitOk,
  tagsOf,
} from '../helpers/fixtures.js';
import { unchanged } from './checksums.js';

const t = useTestApp();

type Json = Record<string, any>;

let alice: string; // contributor of hostile/main
let workerToken: string;
let baseUrl: string;

beforeAll(async () => {
  await createWorkspace(t, 'hostile/main');
  alice = await memberOf(t, 'hostile/main', 'alice');
  await createUser(t, 'bob');
  await createPool(t, { name: 'hostile-pool' });
  workerToken = await registerWorker(t, 'hostile-worker');
  await registerWorker(t, 'static-1');
  const { url } = await t.app.start();
  baseUrl = url.replace(/\/graphql$/, '');
});

const NUL = '\u0000';

/** A JSON value nested `depth` levels deep: {a: {a: … 1 …}}. */
function deep(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}
/** The JSON text of {a: {a: … 1 …}}, built as text: JSON.stringify itself overflows the stack at such depths. */
function deepJson(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}
/** The same as a GraphQL literal. */
function deepLiteral(depth: number): string {
  return `${'{ a: '.repeat(depth)}1${' }'.repeat(depth)}`;
}

/** Runs an operation and returns the whole response (status, data, errors). */
const raw = (query: string, variables: Json = {}, token: string | null = t.adminToken) =>
  t.gql(query, variables, token);

/** Posts a body whose variables are given as JSON text (for values JSON.stringify cannot write). */
async function rawBody(
  query: string,
  variablesJson: string,
  token: string | null,
): Promise<{ status: number; data?: Json; errors?: Json[] }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await t.app.yoga.fetch('http://test/graphql', {
    method: 'POST',
    headers,
    body: `{"query":${JSON.stringify(query)},"variables":${variablesJson}}`,
  });
  return { status: res.status, ...((await res.json()) as Json) };
}

/** A mutation's result union member, which must be a typed error with this code; nothing is written. */
async function refusedMutation(
  query: string,
  variables: Json,
  code: string | RegExp,
  token: string | null = t.adminToken,
): Promise<Json> {
  return unchanged(t, async () => {
    const res = await raw(query, variables, token);
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    expect(res.status).toBe(200);
    const [result] = Object.values(res.data!) as Json[];
    expect(result.__typename, JSON.stringify(result)).toMatch(/Error$/);
    expect(result.code).toMatch(code);
    expect(result.message.length).toBeGreaterThan(10);
    return result;
  });
}

/** A query (or an operation refused as a whole) that must answer a GraphQL error with a client code, not a masked 500; nothing is written. */
async function refusedOperation(
  query: string,
  variables: Json,
  code: string,
  token: string | null = t.adminToken,
): Promise<{ message: string }> {
  return unchanged(t, async () => {
    const res = await raw(query, variables, token);
    expect(res.status, JSON.stringify(res)).toBeLessThan(500);
    expect(res.errors, JSON.stringify(res.data)).toBeDefined();
    const [error] = res.errors!;
    expect(error.extensions?.code, JSON.stringify(res.errors)).toBe(code);
    expect(error.message).not.toMatch(/Unexpected error/);
    return error;
  });
}

const CREATE = `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { __typename ... on WorkRequest { id } ${ERROR_FIELDS} } }`;
const REPORT = `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename ${ERROR_FIELDS} } }`;
const POOL = `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ${ERROR_FIELDS} } }`;

describe('NUL characters are refused wherever a client string goes (one input check)', () => {
  const MUTATIONS: [string, string, Json, string | null][] = [
    [
      'a workspace name',
      'mutation($n: String!) { createWorkspace(input: { name: $n }) { __typename ${E} } }',
      { n: `nul${NUL}/ws` },
      null,
    ],
    [
      'a username',
      'mutation($n: String!) { createUser(input: { username: $n }) { __typename ${E} } }',
      { n: `eve${NUL}` },
      null,
    ],
    [
      'a member username',
      'mutation($n: String!) { setWorkspaceMember(input: { workspace: "hostile/main", username: $n }) { __typename ${E} } }',
      { n: `bob${NUL}` },
      null,
    ],
    [
      'a group member',
      'mutation($n: String!) { addGroupMembers(input: { group: "1", usernames: [$n] }) { __typename ${E} } }',
      { n: `bob${NUL}` },
      null,
    ],
    [
      'a worker name',
      'mutation($n: String!) { registerWorker(input: { name: $n }) { __typename ${E} } }',
      { n: `w${NUL}` },
      null,
    ],
    [
      'a drained worker name',
      'mutation($n: String!) { drainWorker(input: { name: $n }) { __typename ${E} } }',
      { n: `static-1${NUL}` },
      null,
    ],
    [
      'a pool name',
      'mutation($n: String!) { createActivationToken(input: { pool: $n }) { __typename ${E} } }',
      { n: `hostile-pool${NUL}` },
      null,
    ],
    [
      'a rule expression',
      'mutation($e: String!) { createTaskRule(input: { name: "nul-rule", expression: $e, requiredTags: ["a:b"] }) { __typename ${E} } }',
      { e: `task:x${NUL}` },
      null,
    ],
    [
      'an environment codename',
      'mutation($c: String!) { createEnvironment(input: { codename: $c, architecture: "amd64" }) { __typename ${E} } }',
      { c: `sid${NUL}` },
      null,
    ],
    [
      'a pool specification',
      POOL,
      { i: { name: 'nul-pool', providerType: 'local', specifications: { image: `debian${NUL}` } } },
      null,
    ],
    [
      'a provider account value',
      POOL,
      { i: { name: 'nul-pool', providerType: 'local', providerAccount: { token: `x${NUL}` } } },
      null,
    ],
    ['a required tag', CREATE, { i: { ...sbuild('hostile/main'), requiredTags: [`site:x${NUL}`] } }, 'alice'],
    [
      'a taskData string',
      CREATE,
      {
        i: {
          workspace: 'hostile/main',
          taskType: 'internal',
          taskName: 'synchronization_point',
          taskData: { step: `a${NUL}b` },
        },
      },
      'alice',
    ],
    [
      'a taskData list string',
      CREATE,
      {
        i: {
          ...sbuild('hostile/main'),
          taskName: 'autopkgtest',
          taskData: { source_package: 'hello', host_architecture: 'amd64', include_tests: [`t${NUL}`] },
        },
      },
      'alice',
    ],
    [
      'a taskData key',
      CREATE,
      {
        i: {
          workspace: 'hostile/main',
          taskType: 'internal',
          taskName: 'synchronization_point',
          taskData: { step: 'a', [`k${NUL}`]: 1 },
        },
      },
      'alice',
    ],
    ['a reported tool', REPORT, { m: { tools: [`sbuild${NUL}`] } }, 'worker'],
    ['a reported architecture', REPORT, { m: { architectures: [`amd64${NUL}`] } }, 'worker'],
    ['a reported provided tag', REPORT, { m: { providedTags: [`worker:cap:x${NUL}`] } }, 'worker'],
  ];

  it.each(MUTATIONS)('in %s: INVALID_INPUT naming the field', async (_label, query, variables, who) => {
    const token = who === 'alice' ? alice : who === 'worker' ? workerToken : t.adminToken;
    const r = await refusedMutation(query.replace('${E}', ERROR_FIELDS), variables, 'INVALID_INPUT', token);
    expect(r.message).toMatch(/NUL/);
    expect(r.path).toMatch(/\S/);
  });

  const QUERIES: [string, string, Json][] = [
    ['a worker name', 'query($n: String!) { worker(name: $n) { name } }', { n: `w${NUL}` }],
    ['a pool name', 'query($n: String!) { workerPool(name: $n) { name } }', { n: `p${NUL}` }],
    ['a group scope', 'query($s: String!) { groups(scope: $s) { name } }', { s: `s${NUL}` }],
    [
      'a work request filter: taskName',
      'query($f: WorkRequestFilter) { workRequests(filter: $f) { edges { node { id } } } }',
      { f: { taskName: `sbuild${NUL}` } },
    ],
    [
      'a work request filter: workspace',
      'query($f: WorkRequestFilter) { workRequests(filter: $f) { edges { node { id } } } }',
      { f: { workspace: `hostile/main${NUL}` } },
    ],
    [
      'a work request filter: requiresTag',
      'query($f: WorkRequestFilter) { workRequests(filter: $f) { edges { node { id } } } }',
      { f: { requiresTag: `a${NUL}` } },
    ],
    [
      'a work request filter: worker',
      'query($f: WorkRequestFilter) { workRequests(filter: $f) { edges { node { id } } } }',
      { f: { worker: `w${NUL}` } },
    ],
    [
      'a worker filter: pool',
      'query($f: WorkerFilter) { workers(filter: $f) { edges { node { name } } } }',
      { f: { pool: `p${NUL}` } },
    ],
    [
      'a worker filter: providesTag',
      'query($f: WorkerFilter) { workers(filter: $f) { edges { node { name } } } }',
      { f: { providesTag: `a${NUL}` } },
    ],
    ['a cursor', 'query($a: String) { workers(after: $a) { edges { node { name } } } }', { a: `x${NUL}` }],
    ['a work request id', 'query($id: ID!) { workRequest(id: $id) { id } }', { id: `1${NUL}` }],
    ['candidate ids', 'query($ids: [ID!]!) { candidateWorkers(workRequestIds: $ids) { count } }', { ids: [`1${NUL}`] }],
  ];

  it.each(QUERIES)(
    'in a query argument, %s: a GraphQL error INVALID_INPUT, not a 500',
    async (_label, query, variables) => {
      const error = await refusedOperation(query, variables, 'INVALID_INPUT');
      expect(error.message).toMatch(/NUL/);
    },
  );

  it('in a GraphQL string literal too', async () => {
    await refusedOperation(`{ worker(name: "w\\u0000") { name } }`, {}, 'INVALID_INPUT');
  });
});

describe('deeply nested JSON is refused before anything serialises it', () => {
  it('taskData nested 5,000 deep in a variable: INVALID_INPUT', async () => {
    const res = await unchanged(t, () =>
      rawBody(
        CREATE,
        `{"i":{"workspace":"hostile/main","taskType":"worker","taskName":"noop","taskData":${deepJson(5000)}}}`,
        alice,
      ),
    );
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    const r = res.data!.createWorkRequest;
    expect(r).toMatchObject({ __typename: 'InputError', code: 'INVALID_INPUT' });
    expect(r.message).toMatch(/nested more than 32 levels/);
    expect(r.path).toMatch(/^input\.taskData(\.a)+$/);
  });

  it('taskData nested 5,000 deep in a GraphQL literal: refused with a client error, not a 500', async () => {
    const res = await unchanged(t, () =>
      raw(
        `mutation { createWorkRequest(input: { workspace: "hostile/main", taskType: "worker", taskName: "noop", taskData: ${deepLiteral(5000)} }) { __typename ${ERROR_FIELDS} } }`,
        {},
        alice,
      ),
    );
    expect(res.status, JSON.stringify(res.errors)).toBeLessThan(500);
    const refusedAsWhole = res.errors?.[0]?.extensions?.code;
    const refusedAsResult = (res.data?.createWorkRequest as Json | undefined)?.code;
    expect(refusedAsWhole ?? refusedAsResult, JSON.stringify(res)).toMatch(
      /INVALID_INPUT|GRAPHQL_PARSE_FAILED|GRAPHQL_VALIDATION_FAILED|BAD_USER_INPUT|LIMIT_EXCEEDED/,
    );
  });

  it('a provider account nested 5,000 deep: INVALID_INPUT', async () => {
    const res = await unchanged(t, () =>
      rawBody(POOL, `{"i":{"name":"deep-pool","providerAccount":{"k":${deepJson(5000)}}}}`, t.adminToken),
    );
    expect(res.data?.createWorkerPool, JSON.stringify(res)).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      path: expect.stringMatching(/^input\.providerAccount\.k/),
    });
  });

  it('taskData nested just within the limit is judged by its task, not by the nesting rule', async () => {
    const r = await refusedMutation(
      CREATE,
      {
        i: { workspace: 'hostile/main', taskType: 'worker', taskName: 'noop', taskData: { result: true, x: deep(30) } },
      },
      'INVALID_TASK_DATA',
      alice,
    );
    expect(r.path).toBe('input.taskData.x');
  });
});

describe('long tags and long numbers', () => {
  it('twelve required tags of 255 characters are accepted and queued (the class key is hashed)', async () => {
    // Random characters: PostgreSQL compresses a repetitive key below the index's row limit.
    const tags = Array.from(
      { length: 12 },
      (_, i) => `site:${String(i).padStart(2, '0')}${randomBytes(200).toString('base64url').slice(0, 248)}`,
    );
    expect(tags.every((tag) => tag.length === 255)).toBe(true);
    const wr = await submitOk(t, { ...sbuild('hostile/main'), requiredTags: tags }, alice);
    expect(wr.status).toBe('PENDING');
    expect(tagsOf(wr.requiredTags)).toEqual(expect.arrayContaining(tags));
    // And the same set again lands in the same class.
    const again = await submitOk(t, { ...sbuild('hostile/main', 'other'), requiredTags: [...tags].reverse() }, alice);
    const classes = await t.sql<{ class_id: number }>(
      'select distinct class_id from work_request where id = any(?::int[])',
      [`{${wr.id},${again.id}}`],
    );
    expect(classes).toHaveLength(1);
  });

  it.each([
    ['an integer of 200,000 digits', `worker:memory-gib>=${'9'.repeat(200_000)}`],
    ['a fraction of 200,000 digits', `worker:memory-gib>=0.${'0'.repeat(199_998)}1`],
    ['a number one digit over the cap', `worker:memory-gib>=1${'0'.repeat(32)}`],
  ])('a required minimum that is %s: INVALID_TAG naming the cap', async (_label, tag) => {
    const r = await refusedMutation(
      CREATE,
      { i: { ...sbuild('hostile/main'), requiredTags: [tag] } },
      'INVALID_TAG',
      alice,
    );
    expect(r.message).toMatch(/at most 32 characters/);
    expect(r.message.length).toBeLessThan(400);
    expect(r.path).toBe('input.requiredTags[0]');
  });

  it('a pool tag with a value of 200,000 digits: INVALID_TAG', async () => {
    await refusedMutation(
      POOL,
      {
        i: { name: 'long-pool', providerType: 'local', providedTags: [`worker:memory-gib=0.${'0'.repeat(199_998)}1`] },
      },
      'INVALID_TAG',
    );
  });
});

describe('status pages with malformed or NUL names', () => {
  it.each([
    ['a broken percent-encoding', '/-/status/workers/%E0%A4%A/', 400],
    ['a lone percent sign', '/-/status/workers/%/', 400],
    ['an encoded NUL', '/-/status/workers/%00/', 404],
    ['a NUL inside a name', '/-/status/workers/static-1%00/', 404],
  ])('%s: a %s page, not a 500', async (_label, path, status) => {
    const res = await unchanged(t, () => fetch(baseUrl + path));
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    await res.text();
  });
});

describe('admin input is judged one way: refused whole, every problem listed (point 8)', () => {
  const PROBLEMS = '... on InputError { code path tag problems { code path tag message } }';

  it('setWorkerStaticMetadata with a malformed tag changes nothing and lists every problem', async () => {
    const r = await refusedMutation(
      `mutation($m: WorkerMetadataInput!) { setWorkerStaticMetadata(input: { name: "static-1", metadata: $m, concurrency: 7 }) { __typename ${ERROR_FIELDS} ${PROBLEMS} } }`,
      {
        m: {
          providedTags: ['site:fine', 'bad tag', 'worker:cpu-count>=4'],
          requiredTags: ['also bad'],
          architectures: ['arm64'],
        },
      },
      'INVALID_TAG',
    );
    expect(r.problems.map((p: Json) => [p.code, p.path, p.tag])).toEqual([
      ['INVALID_TAG', 'input.metadata.providedTags[1]', 'bad tag'],
      ['INVALID_TAG', 'input.metadata.providedTags[2]', 'worker:cpu-count>=4'],
      ['INVALID_TAG', 'input.metadata.requiredTags[0]', 'also bad'],
    ]);
    const [row] = await t.sql<{ concurrency: number }>(`select concurrency from worker where name = 'static-1'`);
    expect(row.concurrency).toBe(1);
  });

  it('setWorkerStaticMetadata with a tag admins may not provide: TAG_NOT_ALLOWED, as for pools', async () => {
    const onWorker = await refusedMutation(
      `mutation { setWorkerStaticMetadata(input: { name: "static-1", metadata: { providedTags: ["worker:type:signing", "site:ok"] } }) { __typename ${ERROR_FIELDS} ${PROBLEMS} } }`,
      {},
      'TAG_NOT_ALLOWED',
    );
    expect(onWorker).toMatchObject({ path: 'input.metadata.providedTags[0]', tag: 'worker:type:signing' });
    const onPool = await refusedMutation(
      POOL,
      { i: { name: 'typed-pool', providerType: 'local', providedTags: ['worker:type:signing', 'site:ok'] } },
      'TAG_NOT_ALLOWED',
    );
    expect(onPool).toMatchObject({ path: 'input.providedTags[0]', tag: 'worker:type:signing' });
  });

  it('a malformed architecture in static metadata is refused, not dropped', async () => {
    const r = await refusedMutation(
      `mutation { setWorkerStaticMetadata(input: { name: "static-1", metadata: { architectures: ["amd64", "arm 64"] } }) { __typename ${ERROR_FIELDS} ${PROBLEMS} } }`,
      {},
      'INVALID_TAG',
    );
    expect(r).toMatchObject({ path: 'input.metadata.architectures[1]' });
  });

  it('registerWorker with a malformed static tag: refused whole', async () => {
    await refusedMutation(
      `mutation { registerWorker(input: { name: "reg-bad", staticMetadata: { providedTags: ["bad tag"] } }) { __typename ${ERROR_FIELDS} } }`,
      {},
      'INVALID_TAG',
    );
  });

  it('createWorkerPool lists the problems of both tag lists and of the limits at once', async () => {
    const r = await refusedMutation(
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ${ERROR_FIELDS} ${PROBLEMS} } }`,
      {
        i: {
          name: 'many-problems',
          providerType: 'local',
          providedTags: ['bad tag'],
          requiredTags: ['worker:cpu-count=4'],
          maxActiveInstances: -1,
        },
      },
      'INVALID_TAG',
    );
    expect(r.problems.map((p: Json) => p.path)).toEqual([
      'input.providedTags[0]',
      'input.requiredTags[0]',
      'input.maxActiveInstances',
    ]);
  });

  it('valid static metadata is still applied', async () => {
    const r = await ok(
      t,
      `mutation { setWorkerStaticMetadata(input: { name: "static-1", metadata: { providedTags: ["site:fine"] }, concurrency: 2 }) { __typename ... on Worker { concurrency providedTags { tag } } } }`,
    );
    expect(r.setWorkerStaticMetadata.concurrency).toBe(2);
    expect(tagsOf(r.setWorkerStaticMetadata.providedTags)).toContain('site:fine');
  });
});
