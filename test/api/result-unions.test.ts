/**
 * Each mutation's result union lists the errors that mutation can return, and only those: the table
 * below is what its resolver and the services it calls throw (plus the input guard's InputError on
 * every mutation that takes arguments). It is compared with the schema the app serves, and for each
 * mutation real requests (anonymous, and with a NUL in its input) must answer a member of its union.
 */
import { isObjectType, isUnionType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/api/schema.js';
import { ADMIN_TOKEN, useTestApp } from '../helpers/app.js';

const t = useTestApp();

const I = 'InputError';
const U = 'UnauthenticatedError';
const F = 'ForbiddenError';
const N = 'NotFoundError';
const A = 'AlreadyExistsError';
const S = 'InvalidStateError';

type Json = Record<string, unknown>;

/** mutation → [its result type, its errors, a minimal input, what an anonymous call answers]. */
const TABLE: Record<string, [result: string, errors: string[], input: Json | null, anonymous: string]> = {
  createUser: ['UserTokenPayload', [I, U, F, A], { username: 'u1' }, U],
  createWorkspace: ['Workspace', [I, U, F, A], { name: 'a/b' }, U],
  updateWorkspace: ['Workspace', [I, F, N], { name: 'a/b' }, N],
  setWorkspaceMember: ['Workspace', [I, F, N], { workspace: 'a/b', username: 'u1' }, N],
  removeWorkspaceMember: ['Workspace', [I, U, F, N], { workspace: 'a/b', username: 'u1' }, U],
  createGroup: ['Group', [I, U, F, N, A], { scope: 'a', name: 'g' }, U],
  addGroupMembers: ['Group', [I, U, F, N], { group: '1', usernames: ['u1'] }, U],
  createTaskRule: ['TaskRule', [I, U, F, N, A], { name: 'r', requiredTags: ['worker:cap:x'] }, U],
  deleteTaskRule: ['TaskRule', [I, U, F, N], { name: 'r' }, U],
  createEnvironment: ['Environment', [I, U, F], { codename: 'bookworm', architecture: 'amd64' }, U],
  registerWorker: ['WorkerTokenPayload', [I, U, F, N, A], { name: 'w' }, U],
  activateWorker: ['WorkerTokenPayload', [I, U, F, A], { name: 'w' }, U],
  reportWorkerMetadata: ['Worker', [I, U, F], { metadata: { architectures: ['amd64'] } }, U],
  setWorkerStaticMetadata: ['Worker', [I, U, F, N], { name: 'w', metadata: {} }, U],
  drainWorker: ['Worker', [I, U, F, N], { name: 'w' }, U],
  undrainWorker: ['Worker', [I, U, F, N], { name: 'w' }, U],
  enableWorker: ['Worker', [I, U, F, N], { name: 'w' }, U],
  disableWorker: ['Worker', [I, U, F, N], { name: 'w' }, U],
  unquarantineWorker: ['Worker', [I, U, F, N], { name: 'w' }, U],
  terminateWorker: ['Worker', [I, U, F, N, S], { name: 'w' }, U],
  registerWorkerImage: ['WorkerImage', [I, U, F, A], { manifest: { name: 'img' } }, U],
  recordWorkerImagePublication: [
    'WorkerImage',
    [I, U, F, N],
    { image: 'img', provider: 'ec2', region: 'eu-central-1', providerImageId: 'ami-00000000' },
    U,
  ],
  createWorkerPool: ['WorkerPool', [I, U, F, A], { name: 'p' }, U],
  updateWorkerPool: ['WorkerPool', [I, U, F, N], { name: 'p' }, U],
  createActivationToken: ['ActivationTokenPayload', [I, U, F, N, S], { pool: 'p' }, U],
  createInstance: ['InstanceLaunchPayload', [I, U, F, N, A, S], { pool: 'p' }, U],
  recordInstanceLaunched: ['Instance', [I, U, F, N, S], { name: 'i', providerId: 'x' }, U],
  recordInstanceStopped: ['Instance', [I, U, F, N, S], { name: 'i' }, U],
  createToken: ['TokenValuePayload', [I, U, F, N], { label: 'l' }, U],
  revokeToken: ['Token', [I, U, N], { id: '1' }, U],
  rotateToken: ['TokenValuePayload', [I, U, N, S], { id: '1' }, U],
  heartbeat: ['HeartbeatPayload', [I, U, F], { running: ['1'] }, U],
  requestWork: ['RequestWorkPayload', [U, F], null, U],
  releaseWorkRequest: ['WorkRequest', [I, U, F, N, S], { id: '1', reason: 'r' }, U],
  reportInstanceInterruption: ['Worker', [I, U, F, S], { action: 'terminate' }, U],
  startWorkRequest: ['WorkRequest', [I, U, F, N, S], { id: '1' }, U],
  completeWorkRequest: ['WorkRequest', [I, U, F, N, S], { id: '1', result: 'SUCCESS' }, U],
  appendWorkRequestLog: ['WorkRequestLogAck', [I, U, F, N, S], { id: '1', offset: 0, bytes: 1, text: 'x' }, U],
  createWorkRequest: [
    'WorkRequest',
    [I, U, F, N],
    { workspace: 'a/b', taskType: 'worker', taskName: 'noop', taskData: {} },
    U,
  ],
  createWorkRequests: [
    'CreateWorkRequestsPayload',
    [I, U, F, N],
    { requests: [{ workspace: 'a/b', taskType: 'worker', taskName: 'noop', taskData: {} }] },
    U,
  ],
  abortWorkRequest: ['WorkRequest', [I, U, F, N, S], { id: '1' }, U],
  addWorkRequestDependencies: ['WorkRequest', [I, U, F, N, S], { id: '1', dependsOn: ['2'] }, U],
};

const mutationFields = schema.getMutationType()!.getFields();

/** The members of a mutation's result union. */
function membersOf(mutation: string): string[] {
  const type = mutationFields[mutation]!.type;
  const named = 'ofType' in type ? type.ofType : type;
  if (!isUnionType(named)) throw new Error(`${mutation} does not answer a union`);
  return named
    .getTypes()
    .map((m) => m.name)
    .sort();
}

/** The same input with a NUL inside its first string. */
function withNul(value: unknown): [unknown, boolean] {
  if (typeof value === 'string') return [`x\u0000${value}`, true];
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const [v, done] = withNul(value[i]);
      if (done) return [value.map((x, j) => (j === i ? v : x)), true];
    }
  } else if (value && typeof value === 'object') {
    for (const [k, x] of Object.entries(value)) {
      const [v, done] = withNul(x);
      if (done) return [{ ...value, [k]: v }, true];
    }
  }
  return [value, false];
}

async function call(mutation: string, input: Json | null, token: string | null): Promise<string> {
  const inputType = mutationFields[mutation]!.args.find((a) => a.name === 'input')?.type.toString();
  const query = input
    ? `mutation($input: ${inputType}) { ${mutation}(input: $input) { __typename ... on Error { code } } }`
    : `mutation { ${mutation} { __typename ... on Error { code } } }`;
  const res = await t.gql(query, input ? { input } : {}, token);
  expect(res.errors, `${mutation}: ${JSON.stringify(res.errors)}`).toBeUndefined();
  return (res.data![mutation] as { __typename: string }).__typename;
}

describe('result unions', () => {
  it('the table names every mutation of the schema', () => {
    expect(Object.keys(TABLE).sort()).toEqual(Object.keys(mutationFields).sort());
  });

  it.each(Object.entries(TABLE))(
    '%s: its union is its result and exactly the errors it can return',
    (mutation, [result, errors]) => {
      expect(membersOf(mutation)).toEqual([result, ...errors].sort());
      const named = schema.getType(result);
      expect(isObjectType(named)).toBe(true);
    },
  );

  it.each(Object.entries(TABLE))(
    '%s: an anonymous call answers a member of its union',
    async (mutation, [, errors, input, anonymous]) => {
      const typename = await call(mutation, input, null);
      expect(typename).toBe(anonymous);
      expect(errors).toContain(typename);
    },
  );

  it.each(Object.entries(TABLE).filter(([, [, , input]]) => input !== null))(
    '%s: a NUL in its input answers InputError',
    async (mutation, [, errors, input]) => {
      const [bad, changed] = withNul(input);
      expect(changed).toBe(true);
      const typename = await call(mutation, bad as Json, ADMIN_TOKEN);
      expect(typename).toBe(I);
      expect(errors).toContain(typename);
    },
  );
});
