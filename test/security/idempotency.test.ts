import { describe, expect, it } from 'vitest';
import { purgeIdempotencyKeys } from '../../src/services/work/idempotency.js';
import { useTestApp } from '../helpers/app.js';
import { createUser, createWorkspace, ERROR_FIELDS, snapshot } from '../helpers/fixtures.js';

// docs/design.md: limits and tokens: a create mutation takes an optional idempotency key; a retried create answers the first.
const t = useTestApp();

const CREATE = `mutation($i: CreateWorkRequestInput!, $k: String) { createWorkRequest(input: $i, idempotencyKey: $k) { __typename ... on WorkRequest { id priorityBase } ${ERROR_FIELDS} } }`;
/** A noop request; `n` (its base priority) tells one input from another. */
const noop = ({ n = 0 }: { n?: number } = {}) => ({
  workspace: 'idem/main',
  taskType: 'worker',
  taskName: 'noop',
  taskData: {},
  priorityBase: n,
});
const count = async (table: string) => (await t.sql<{ n: number }>(`select count(*)::int as n from ${table}`))[0].n;

describe('createWorkRequest with an idempotency key', () => {
  it('answers a retry with the first request, and creates nothing more', async () => {
    await createWorkspace(t, 'idem/main');
    const first = await t.gql(CREATE, { i: noop({ n: 1 }), k: 'retry-1' });
    const again = await t.gql(CREATE, { i: noop({ n: 1 }), k: 'retry-1' });
    expect(first.data!.createWorkRequest.__typename).toBe('WorkRequest');
    expect(again.data!.createWorkRequest).toEqual(first.data!.createWorkRequest);
    expect(await count('work_request')).toBe(1);
    const without = await t.gql(CREATE, { i: noop({ n: 1 }) });
    expect(without.data!.createWorkRequest.id).not.toBe(first.data!.createWorkRequest.id);
  });

  it('refuses the same key with another input, writing nothing', async () => {
    const before = await snapshot(t);
    const other = await t.gql(CREATE, { i: noop({ n: 2 }), k: 'retry-1' });
    expect(other.data!.createWorkRequest).toMatchObject({
      __typename: 'InputError',
      code: 'IDEMPOTENCY_KEY_REUSED',
      path: 'idempotencyKey',
    });
    const elsewhere = await t.gql(
      `mutation { createWorkspace(input: { name: "idem/other" }, idempotencyKey: "retry-1") { __typename ${ERROR_FIELDS} } }`,
    );
    expect(elsewhere.data!.createWorkspace.code).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(await snapshot(t)).toEqual(before);
    const bad = await t.gql(CREATE, { i: noop(), k: 'has space' });
    expect(bad.data!.createWorkRequest).toMatchObject({ code: 'INVALID_INPUT', path: 'idempotencyKey' });
  });

  it('gives concurrent creates with one key one request, and all of them its answer', async () => {
    const before = await count('work_request');
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => t.gql(CREATE, { i: noop({ n: 3 }), k: 'concurrent' })),
    );
    const ids = new Set(answers.map((a) => a.data!.createWorkRequest.id));
    expect(answers.map((a) => a.data!.createWorkRequest.__typename)).toEqual(Array(8).fill('WorkRequest'));
    expect(ids.size).toBe(1);
    expect(await count('work_request')).toBe(before + 1);
  });

  it('keeps keys per creator: another user’s same key is another request', async () => {
    const token = await createUser(t, 'idem-user');
    await t.gql(
      `mutation { setWorkspaceMember(input: { workspace: "idem/main", username: "idem-user" }) { __typename } }`,
    );
    const mine = await t.gql(CREATE, { i: noop({ n: 1 }), k: 'retry-1' }, token);
    expect(mine.data!.createWorkRequest.__typename).toBe('WorkRequest');
    const [{ n }] = await t.sql<{ n: number }>(`select count(*)::int as n from idempotency_key where key = 'retry-1'`);
    expect(n).toBe(2);
  });

  it('forgets a key after its lifetime: the create runs again, and the purge deletes it', async () => {
    await t.sql(`update idempotency_key set created_at = now() - interval '25 hours' where key = 'retry-1'`);
    const before = await count('work_request');
    const fresh = await t.gql(CREATE, { i: noop({ n: 9 }), k: 'retry-1' });
    expect(fresh.data!.createWorkRequest.__typename).toBe('WorkRequest');
    expect(await count('work_request')).toBe(before + 1);
    const purged = await purgeIdempotencyKeys(t.app.orm.em.fork(), t.app.config.input.idempotencyKeyTtlMs);
    expect(purged).toBe(1); // the other user's expired key; the one just used is new
  });
});

describe('the other creates', () => {
  it('createUser and registerWorker answer a retry with the same account and the token shown the first time', async () => {
    const user = `mutation { createUser(input: { username: "idem-bob" }, idempotencyKey: "u-1") { __typename ... on UserTokenPayload { token user { username } } ${ERROR_FIELDS} } }`;
    const [a, b] = [await t.gql(user), await t.gql(user)];
    expect(a.data!.createUser.__typename).toBe('UserTokenPayload');
    expect(b.data).toEqual(a.data);
    expect((await t.gql(`{ me { username } }`, {}, a.data!.createUser.token)).data!.me.username).toBe('idem-bob');
    const worker = `mutation { registerWorker(input: { name: "idem-w" }, idempotencyKey: "w-1") { __typename ... on WorkerTokenPayload { token worker { name } } ${ERROR_FIELDS} } }`;
    const [c, d] = [await t.gql(worker), await t.gql(worker)];
    expect(c.data!.registerWorker.__typename).toBe('WorkerTokenPayload');
    expect(d.data).toEqual(c.data);
    expect(await count('worker')).toBe(1);
    const [{ sealed }] = await t.sql<{ sealed: string }>(
      `select sealed_secret as sealed from idempotency_key where key = 'w-1'`,
    );
    expect(sealed).not.toContain(c.data!.registerWorker.token); // kept sealed, never in clear
  });

  it('createWorkspace, createWorkerPool and createEnvironment answer a retry with the first one', async () => {
    for (const [mutation, table] of [
      [
        `createWorkspace(input: { name: "idem/again" }, idempotencyKey: "ws-1") { __typename ... on Workspace { name } ${ERROR_FIELDS} }`,
        'workspace',
      ],
      [
        `createWorkerPool(input: { name: "idem-pool", providerType: "local" }, idempotencyKey: "p-1") { __typename ... on WorkerPool { name } ${ERROR_FIELDS} }`,
        'worker_pool',
      ],
      [
        `createEnvironment(input: { codename: "trixie", architecture: "amd64" }, idempotencyKey: "e-1") { __typename ... on Environment { id } ${ERROR_FIELDS} }`,
        'environment',
      ],
    ] as const) {
      const before = await count(table);
      const first = await t.gql(`mutation { ${mutation} }`);
      const again = await t.gql(`mutation { ${mutation} }`);
      expect(Object.values(first.data!)[0]).not.toHaveProperty('code');
      expect(again.data).toEqual(first.data);
      expect(await count(table)).toBe(before + 1);
    }
  });
});

describe('a replay answers only what the caller may read now', () => {
  const PRIVATE = `mutation($i: CreateWorkRequestInput!, $k: String) {
    createWorkRequest(input: $i, idempotencyKey: $k) { __typename ... on WorkRequest { id taskData status workspace { name } } ${ERROR_FIELDS} }
  }`;

  it('a user removed from a private workspace replays her key: refused, and nothing of the request is shown', async () => {
    await createWorkspace(t, 'idem/private', { isPublic: false });
    const token = await createUser(t, 'idem-carol');
    await t.gql(
      `mutation { setWorkspaceMember(input: { workspace: "idem/private", username: "idem-carol" }) { __typename } }`,
    );
    const input = { ...noop({ n: 7 }), workspace: 'idem/private' };
    const first = await t.gql(PRIVATE, { i: input, k: 'before-removal' }, token);
    expect(first.data!.createWorkRequest.__typename).toBe('WorkRequest');
    const again = await t.gql(PRIVATE, { i: input, k: 'before-removal' }, token);
    expect(again.data).toEqual(first.data);

    await t.gql(
      `mutation { removeWorkspaceMember(input: { workspace: "idem/private", username: "idem-carol" }) { __typename } }`,
    );
    const before = await snapshot(t);
    const replay = await t.gql(PRIVATE, { i: input, k: 'before-removal' }, token);
    expect(replay.data!.createWorkRequest).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    expect(JSON.stringify(replay)).not.toContain('idem/private');
    expect(replay.data!.createWorkRequest).not.toHaveProperty('id');
    expect(
      (await t.gql(`query($id: ID!) { workRequest(id: $id) { id } }`, { id: first.data!.createWorkRequest.id }, token))
        .data!.workRequest,
    ).toBeNull();
    expect(await snapshot(t)).toEqual(before);
  });

  it('an admin create replayed by a user who is no longer an admin is refused: the token it showed is not shown again', async () => {
    const token = await createUser(t, 'idem-dave', true);
    const register = `mutation { registerWorker(input: { name: "idem-dave-w" }, idempotencyKey: "dw-1") { __typename ... on WorkerTokenPayload { token } ${ERROR_FIELDS} } }`;
    const first = await t.gql(register, {}, token);
    expect(first.data!.registerWorker.__typename).toBe('WorkerTokenPayload');
    // No mutation demotes an admin; the database does it here (its token becomes a user token).
    await t.sql(`update app_user set is_admin = false where username = 'idem-dave'`);
    await t.sql(
      `update token set kind = 'user' where user_id = (select id from app_user where username = 'idem-dave')`,
    );
    const replay = await t.gql(register, {}, token);
    expect(replay.data!.registerWorker).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    expect(JSON.stringify(replay)).not.toContain(first.data!.registerWorker.token);
  });
});
