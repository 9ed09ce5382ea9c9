import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  ERROR_FIELDS,
  createUser,
  createWorkspace,
  memberOf,
  ok,
  sbuild,
  snapshot,
  submitOk,
} from '../helpers/fixtures.js';

const t = useTestApp({ input: { maxBatchRequests: 50 } });

const BATCH = `mutation($input: CreateWorkRequestsInput!, $key: String) {
  createWorkRequests(input: $input, idempotencyKey: $key) {
    __typename
    ... on CreateWorkRequestsPayload { requests { id status taskName createdBy { username } requiredTags { tag provenance source } } }
    ${ERROR_FIELDS}
    ... on InputError { problems { code path message tag } }
  }
}`;

const batch = async (requests: unknown[], token?: string | null, key?: string) =>
  (await ok(t, BATCH, { input: { requests }, key }, token)).createWorkRequests;
const requestRows = async () => (await t.sql<{ n: number }>('select count(*)::int as n from work_request'))[0].n;

let alice: string;
let outsider: string;

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  await createWorkspace(t, 'debian/private', { isPublic: false });
  alice = await memberOf(t, 'debian/main', 'alice');
  outsider = await createUser(t, 'mallory');
});

describe('createWorkRequests', () => {
  it('creates every request of a valid batch in order, each tagged as one create tags it', async () => {
    const before = await requestRows();
    const input = Array.from({ length: 20 }, (_, i) =>
      sbuild('debian/main', `pkg-${i}`, { requiredTags: i % 2 ? ['worker:memory-gib>=16'] : [] }),
    );
    const result = await batch(input, alice);
    expect(result.__typename).toBe('CreateWorkRequestsPayload');
    expect(result.requests).toHaveLength(20);
    const ids = result.requests.map((r: { id: string }) => Number(r.id));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids); // input order, ids ascending
    expect(await requestRows()).toBe(before + 20);
    for (const r of result.requests)
      expect(r).toMatchObject({ status: 'PENDING', taskName: 'sbuild', createdBy: { username: 'alice' } });
    expect(result.requests[1].requiredTags).toContainEqual({
      tag: 'worker:memory-gib>=16',
      provenance: 'USER',
      source: 'user-input',
    });
    expect(result.requests[0].requiredTags.map((e: { tag: string }) => e.tag)).not.toContain('worker:memory-gib>=16');
    // The same tags and class as the same request created alone.
    const single = await submitOk(
      t,
      sbuild('debian/main', 'pkg-1', { requiredTags: ['worker:memory-gib>=16'] }),
      alice,
    );
    const rows = await t.sql<{ id: number; required_tags: string[]; provided_tags: string[]; class_id: number }>(
      'select id, required_tags, provided_tags, class_id from work_request where id = any(?::int[]) order by id',
      [`{${ids[1]},${single.id}}`],
    );
    expect(rows[0].class_id).not.toBeNull();
    expect({ ...rows[0], id: 0 }).toEqual({ ...rows[1], id: 0 });
  });

  it('writes nothing when one request is bad, and names it by index and field', async () => {
    const before = await snapshot(t);
    const input = [
      sbuild('debian/main', 'alpha'),
      sbuild('debian/main', 'beta', {
        taskData: { source_package: 'beta', host_architecture: 'amd64', backend: 'nope' },
      }),
      sbuild('debian/main', 'gamma', { providedTags: ['bad tag'] }),
    ];
    const result = await batch(input, alice);
    expect(result.__typename).toBe('InputError');
    const paths = result.problems.map((p: { path: string }) => p.path);
    expect(paths.some((p: string) => p.startsWith('input.requests[1].taskData'))).toBe(true);
    expect(paths).toContain('input.requests[2].providedTags[0]');
    expect(paths.some((p: string) => p.startsWith('input.requests[0]'))).toBe(false);
    expect(result.problems.find((p: { path: string }) => p.path === 'input.requests[2].providedTags[0]')).toMatchObject(
      { code: 'INVALID_TAG', tag: 'bad tag' },
    );
    expect(await snapshot(t)).toEqual(before);
  });

  it('names an unknown dependency by its request', async () => {
    const before = await requestRows();
    const result = await batch(
      [sbuild('debian/main', 'alpha'), sbuild('debian/main', 'beta', { dependsOn: ['999999'] })],
      alice,
    );
    expect(result).toMatchObject({
      __typename: 'InputError',
      code: 'UNKNOWN_DEPENDENCY',
      path: 'input.requests[1].dependsOn',
    });
    expect(await requestRows()).toBe(before);
  });

  it('keeps requests with unfinished dependencies BLOCKED, and the others PENDING', async () => {
    const first = await submitOk(t, sbuild('debian/main', 'dep'), alice);
    const result = await batch(
      [sbuild('debian/main', 'xeno', { dependsOn: [first.id] }), sbuild('debian/main', 'yak')],
      alice,
    );
    expect(result.requests.map((r: { status: string }) => r.status)).toEqual(['BLOCKED', 'PENDING']);
    const deps = await t.sql('select depends_on_id from work_request_dependency where work_request_id = ?', [
      Number(result.requests[0].id),
    ]);
    expect(deps).toEqual([{ depends_on_id: Number(first.id) }]);
  });

  it('refuses a batch over the limit, and an empty one, writing nothing', async () => {
    const before = await requestRows();
    const tooMany = await batch(
      Array.from({ length: 51 }, () => sbuild('debian/main')),
      alice,
    );
    expect(tooMany).toMatchObject({ __typename: 'InputError', code: 'INVALID_INPUT', path: 'input.requests' });
    expect(tooMany.message).toContain('at most 50');
    expect(await batch([], alice)).toMatchObject({ __typename: 'InputError', path: 'input.requests' });
    expect(await requestRows()).toBe(before);
  });

  it('refuses the anonymous, a revoked-like unknown token, and outsiders of the workspace', async () => {
    const before = await requestRows();
    expect(await batch([sbuild('debian/main')], null)).toMatchObject({ __typename: 'UnauthenticatedError' });
    const unknown = await t.gql(
      BATCH,
      { input: { requests: [sbuild('debian/main')] } },
      'tsk_user_not-a-token-000000000000',
    );
    expect(unknown.data?.createWorkRequests ?? null).toBeNull();
    expect(unknown.errors?.length).toBeGreaterThan(0);
    const forbidden = await batch([sbuild('debian/main')], outsider);
    expect(forbidden).toMatchObject({ __typename: 'ForbiddenError' });
    expect(forbidden.message).toContain('input.requests[0]');
    // A private workspace does not exist for those outside it.
    expect(await batch([sbuild('debian/main'), sbuild('debian/private')], alice)).toMatchObject({
      __typename: 'NotFoundError',
      path: 'input.requests[1].workspace',
    });
    expect(await requestRows()).toBe(before);
  });

  it('answers NUL characters and huge input with typed errors, writing nothing', async () => {
    const before = await requestRows();
    const nul = await batch([sbuild('debian/main'), sbuild('debian/main', 'x\u0000y')], alice);
    expect(nul).toMatchObject({ __typename: 'InputError', code: 'INVALID_INPUT' });
    expect(nul.path).toContain('requests[1].taskData.source_package');
    const huge = await batch(
      [
        sbuild('debian/main', 'alpha', {
          taskData: { source_package: 'alpha', host_architecture: 'amd64', blob: 'x'.repeat(70_000) },
        }),
      ],
      alice,
    );
    expect(huge).toMatchObject({
      __typename: 'InputError',
      code: 'TASK_DATA_TOO_LARGE',
      path: 'input.requests[0].taskData',
    });
    const bigNumber = await t.gql(
      BATCH,
      { input: { requests: [sbuild('debian/main', 'alpha', { priorityBase: 1e300 })] } },
      alice,
    );
    expect(bigNumber.status).toBeLessThan(500);
    expect(bigNumber.data?.createWorkRequests ?? null).toBeNull();
    const deep = await batch(
      [sbuild('debian/main', 'alpha', { taskData: JSON.parse('{"a":'.repeat(100) + '1' + '}'.repeat(100)) })],
      alice,
    );
    expect(deep).toMatchObject({ __typename: 'InputError', code: 'INVALID_INPUT' });
    expect(await requestRows()).toBe(before);
  });

  it('answers a retry with the same idempotency key with the same requests, creating nothing', async () => {
    const input = [sbuild('debian/main', 'k1'), sbuild('debian/main', 'k2')];
    const first = await batch(input, alice, 'batch-key-1');
    const before = await requestRows();
    const again = await batch(input, alice, 'batch-key-1');
    expect(again.requests.map((r: { id: string }) => r.id)).toEqual(first.requests.map((r: { id: string }) => r.id));
    expect(await requestRows()).toBe(before);
    expect(await batch([sbuild('debian/main', 'other')], alice, 'batch-key-1')).toMatchObject({
      __typename: 'InputError',
      code: 'IDEMPOTENCY_KEY_REUSED',
    });
  });
});
