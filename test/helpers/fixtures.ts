/**
 * Small set-up steps the API tests share, each done through GraphQL the way a client would.
 * They fail the test at once when a step does not succeed, so a test body only checks what it is about.
 */
import { expect } from 'vitest';
import type { TestApp } from './app.js';

type Json = Record<string, any>;

/** Runs an operation that must succeed (no GraphQL errors) and returns its data. */
export async function ok(
  t: TestApp,
  query: string,
  variables?: Record<string, unknown>,
  token?: string | null,
): Promise<Json> {
  const res = await t.gql(query, variables, token);
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  expect(res.status).toBe(200);
  return res.data!;
}

/** Runs a mutation whose result union must be the given member, and returns that result. */
export async function expectResult(
  t: TestApp,
  typename: string,
  query: string,
  variables?: Record<string, unknown>,
  token?: string | null,
): Promise<Json> {
  const data = await ok(t, query, variables, token);
  const [result] = Object.values(data) as Json[];
  expect(result.__typename, JSON.stringify(result)).toBe(typename);
  return result;
}

/** The selection of a typed error, for every mutation's result union that takes input (requestWork's takes none: no InputError). */
export const ERROR_FIELDS = '... on Error { code message path } ... on InputError { tag }';

/** Creates a user (admin only) and returns its token. */
export async function createUser(t: TestApp, username: string, isAdmin = false): Promise<string> {
  const r = await expectResult(
    t,
    'UserTokenPayload',
    `mutation($u: String!, $a: Boolean) { createUser(input: { username: $u, isAdmin: $a }) { __typename ... on UserTokenPayload { token } ${ERROR_FIELDS} } }`,
    { u: username, a: isAdmin },
  );
  return r.token as string;
}

/** Creates a workspace `scope/name` (public unless told otherwise). */
export async function createWorkspace(
  t: TestApp,
  name: string,
  opts: { isPublic?: boolean; providableTagPrefixes?: string[] } = {},
): Promise<void> {
  await expectResult(
    t,
    'Workspace',
    `mutation($i: WorkspaceInput!) { createWorkspace(input: $i) { __typename ${ERROR_FIELDS} } }`,
    { i: { name, ...opts } },
  );
}

/** Makes a user a member of a workspace with a role (CONTRIBUTOR by default). */
export async function addMember(t: TestApp, workspace: string, username: string, role = 'CONTRIBUTOR'): Promise<void> {
  await expectResult(
    t,
    'Workspace',
    `mutation($w: String!, $u: String!, $r: WorkspaceRole) { setWorkspaceMember(input: { workspace: $w, username: $u, role: $r }) { __typename ${ERROR_FIELDS} } }`,
    { w: workspace, u: username, r: role },
  );
}

/** Creates a user who is a member of a (new or existing) workspace and returns the user's token. */
export async function memberOf(t: TestApp, workspace: string, username: string, role = 'CONTRIBUTOR'): Promise<string> {
  const token = await createUser(t, username);
  await addMember(t, workspace, username, role);
  return token;
}

/** Registers a worker (admin) and returns its token. */
export async function registerWorker(
  t: TestApp,
  name: string,
  opts: { pool?: string; type?: string; concurrency?: number; staticMetadata?: Json } = {},
): Promise<string> {
  const r = await expectResult(
    t,
    'WorkerTokenPayload',
    `mutation($i: RegisterWorkerInput!) { registerWorker(input: $i) { __typename ... on WorkerTokenPayload { token } ${ERROR_FIELDS} } }`,
    { i: { name, ...opts } },
  );
  return r.token as string;
}

/** An amd64 machine with unshare and sbuild: what most tests need a worker to report. */
export const AMD64_METADATA = {
  architectures: ['amd64'],
  cpuCount: 4,
  totalPhysicalMemory: 8 * 1024 ** 3,
  diskFree: 50 * 1024 ** 3,
  executors: ['unshare'],
  tools: ['sbuild'],
  tasks: [{ type: 'worker', name: 'sbuild', version: 1 }],
};

/** An amd64 machine that runs noop: what the WebSocket tests' workers report. */
export const NOOP_METADATA = {
  architectures: ['amd64'],
  cpuCount: 4,
  totalPhysicalMemory: 8 * 1024 ** 3,
  diskFree: 60 * 1024 ** 3,
  executors: ['unshare'],
  tasks: [{ type: 'worker', name: 'noop', version: 1 }],
};

/** Reports dynamic metadata with a worker token and returns the worker as the server then sees it. */
export async function reportMetadata(t: TestApp, workerToken: string, metadata: Json = AMD64_METADATA): Promise<Json> {
  return expectResult(
    t,
    'Worker',
    `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) {
      __typename ... on Worker { name status providedTags { tag provenance source } rejectedTags { tag provenance code reason } } ${ERROR_FIELDS} } }`,
    { m: metadata },
    workerToken,
  );
}

/** Registers a worker and reports metadata for it, so that it is connected; returns its token. */
export async function connectedWorker(
  t: TestApp,
  name: string,
  opts: Parameters<typeof registerWorker>[2] = {},
  metadata: Json = AMD64_METADATA,
): Promise<string> {
  const token = await registerWorker(t, name, opts);
  await reportMetadata(t, token, metadata);
  return token;
}

/** Creates a worker pool (admin). */
/** Creates a pool (a `local` one unless the input names its provider). */
export async function createPool(t: TestApp, input: Json): Promise<Json> {
  const i = { providerType: 'local', ...input };
  return expectResult(
    t,
    'WorkerPool',
    `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on WorkerPool { name } ${ERROR_FIELDS} } }`,
    { i },
  );
}

/** The fields of a created work request most tests look at. */
export const WORK_REQUEST_FIELDS = `id status statusReason taskName dependsOn workspace { name } createdBy { username }
  providedTags { tag provenance source } requiredTags { tag provenance source }
  droppedTags { tag provenance source set code reason }`;

/** Runs createWorkRequest and returns the result union member (a WorkRequest or a typed error). */
export async function submit(t: TestApp, input: Json, token?: string | null): Promise<Json> {
  const data = await ok(
    t,
    `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { __typename ... on WorkRequest { ${WORK_REQUEST_FIELDS} } ${ERROR_FIELDS} } }`,
    { i: input },
    token,
  );
  return data.createWorkRequest as Json;
}

/** Runs createWorkRequest, which must succeed, and returns the work request. */
export async function submitOk(t: TestApp, input: Json, token?: string | null): Promise<Json> {
  const wr = await submit(t, input, token);
  expect(wr.__typename, JSON.stringify(wr)).toBe('WorkRequest');
  return wr;
}

/** An sbuild of a source package in a workspace. */
export function sbuild(workspace: string, sourcePackage = 'hello', extra: Json = {}): Json {
  return {
    workspace,
    taskType: 'worker',
    taskName: 'sbuild',
    taskData: { source_package: sourcePackage, host_architecture: 'amd64' },
    ...extra,
  };
}

/** Just the tag strings of a list of entries. */
export function tagsOf(entries: readonly { tag: string }[]): string[] {
  return entries.map((e) => e.tag);
}

/** The tables that writes land in; `snapshot` reads all of them to prove a refusal wrote nothing. */
export const ALL_TABLES = [
  'app_user',
  'token',
  'scope',
  'workspace',
  'workspace_member',
  'user_group',
  'user_group_member',
  'task_rule',
  'environment',
  'worker_pool',
  'worker',
  'instance',
  'work_request',
  'work_request_dependency',
  'work_request_log',
  'work_request_log_chunk',
] as const;

/** Every row of the given tables, as JSON text per table: equal snapshots mean nothing was written. */
export async function snapshot(t: TestApp, tables: readonly string[] = ALL_TABLES): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const table of tables) {
    const [row] = await t.sql<{ rows: string | null }>(
      `select json_agg(x order by x::text)::text as rows from "${table}" x`,
    );
    out[table] = row.rows ?? '[]';
  }
  return out;
}
