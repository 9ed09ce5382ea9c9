/**
 * Nested lists must cost a constant number of SQL statements, whatever their length (STYLE habit 6).
 * The statements are counted from the ORM's own query log: at debug level the app logs every
 * statement it sends to PostgreSQL, so this file builds the app with a debug logger that keeps
 * the lines in memory, on its own fresh database.
 */
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/server/app.js';
import { loadConfig } from '../../src/core/config/config.js';
import { hashToken } from '../../src/services/identity/tokens.js';
import { ADMIN_TOKEN, type GqlResult } from '../helpers/app.js';
import { createTestDatabase } from '../helpers/db.js';

let app: App;
let dropDatabase: () => Promise<void>;
/** The ORM's log lines since the last reset. */
let ormLines: string[] = [];
/** How many ORM log lines were ever written, to tell when the app has gone quiet. */
let ormLineCount = 0;

beforeAll(async () => {
  const db = await createTestDatabase();
  dropDatabase = db.drop;
  const config = loadConfig(
    {},
    {
      server: {
        databaseUrl: db.url,
        dataDir: path.join(os.tmpdir(), 'tagsched-test'),
        adminToken: ADMIN_TOKEN,
        secretKey: 'test-secret-key',
        port: 0,
        host: '127.0.0.1',
      },
    },
  );
  const log = pino(
    { level: 'debug' },
    {
      write(line: string) {
        const entry = JSON.parse(line) as { orm?: boolean; msg: string };
        if (!entry.orm) return;
        ormLines.push(entry.msg);
        ormLineCount += 1;
      },
    },
  );
  app = await buildApp(config, { log });
});

afterAll(async () => {
  await app?.stop();
  await dropDatabase?.();
});

async function gql(query: string, variables: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const res = await app.yoga.fetch('http://test/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as GqlResult;
  expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
  return body.data!;
}

/**
 * Waits until the app has sent no statement for a while, so that work the set-up mutations started
 * in the background (a scheduling pass after new pending work) is not counted as the operation's.
 */
async function settle(quietMs = 100, maxMs = 5_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  for (;;) {
    const before = ormLineCount;
    await new Promise((resolve) => setTimeout(resolve, quietMs));
    if (ormLineCount === before) return;
    if (Date.now() > deadline) throw new Error(`the app kept sending statements for ${maxMs} ms`);
  }
}

/** Runs one operation on an otherwise idle app and returns its data and the SQL statements it sent. */
async function statementsOf(query: string): Promise<{ data: Record<string, any>; statements: string[] }> {
  await settle();
  ormLines = [];
  const data = await gql(query);
  // MikroORM writes each statement as "[query] <sql> [took …]".
  const statements = ormLines.filter((line) => line.includes('[query]'));
  return { data, statements };
}

let registered = 0;
/** Registers workers until there are `total`, spread round-robin over five pools (created first). */
async function growWorkersTo(total: number): Promise<void> {
  if (registered === 0) {
    for (let i = 0; i < 5; i++) {
      await gql(
        `mutation($n: String!) { createWorkerPool(input: { name: $n, providerType: "local", providedTags: ["site:pool"] }) { __typename } }`,
        { n: `pool-${i}` },
      );
    }
  }
  for (; registered < total; registered++) {
    const r = await gql(`mutation($i: RegisterWorkerInput!) { registerWorker(input: $i) { __typename } }`, {
      i: {
        name: `w-${String(registered).padStart(3, '0')}`,
        pool: `pool-${registered % 5}`,
        staticMetadata: { architectures: ['amd64'], tools: ['sbuild'] },
      },
    });
    expect(r.registerWorker.__typename).toBe('WorkerTokenPayload');
  }
}

const WORKERS_QUERY = '{ workers(first: 100) { edges { node { name status pool { name } providedTags { tag } } } } }';
/** At most: the token, the workers, their pools, their active work counts, and a little slack. */
const MAX_STATEMENTS = 5;

describe('the workers list', () => {
  it('costs the same few statements for 10 workers as for 50', async () => {
    await growWorkersTo(10);
    const ten = await statementsOf(WORKERS_QUERY);
    expect(ten.data.workers.edges).toHaveLength(10);

    await growWorkersTo(50);
    const fifty = await statementsOf(WORKERS_QUERY);
    const nodes = fifty.data.workers.edges.map((e: { node: Record<string, any> }) => e.node);
    expect(nodes).toHaveLength(50);
    // The answer is complete: every worker with its pool, status and tags.
    expect(new Set(nodes.map((n: { pool: { name: string } }) => n.pool.name))).toEqual(
      new Set(['pool-0', 'pool-1', 'pool-2', 'pool-3', 'pool-4']),
    );
    expect(nodes[7]).toEqual({
      name: 'w-007',
      status: 'DISCONNECTED',
      pool: { name: 'pool-2' },
      providedTags: expect.arrayContaining([
        { tag: 'worker:build-arch:amd64' },
        { tag: 'site:pool' },
        { tag: 'worker:type:worker' },
      ]),
    });

    expect(ten.statements.length, ten.statements.join('\n')).toBeLessThanOrEqual(MAX_STATEMENTS);
    expect(fifty.statements.length, fifty.statements.join('\n')).toBe(ten.statements.length);
  });

  it('logs statements without their parameters, so no secret reaches the debug log', async () => {
    const { statements } = await statementsOf(WORKERS_QUERY);
    expect(statements.length).toBeGreaterThan(0);
    const all = statements.join('\n');
    expect(all).not.toContain(hashToken(ADMIN_TOKEN));
    expect(all).not.toContain(ADMIN_TOKEN);
  });
});

describe('the work requests list', () => {
  let created = 0;
  /** Submits sbuilds until there are `total`, over three workspaces; every other one is assigned to a worker. */
  async function growRequestsTo(total: number): Promise<void> {
    for (; created < total; created++) {
      const r = await gql(
        `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { __typename ... on WorkRequest { id } ... on Error { message } } }`,
        {
          i: {
            workspace: `wr/ws-${created % 3}`,
            taskType: 'worker',
            taskName: 'sbuild',
            taskData: { source_package: `pkg-${created}`, host_architecture: 'amd64' },
          },
        },
      );
      expect(r.createWorkRequest.__typename, r.createWorkRequest.message).toBe('WorkRequest');
      if (created % 2 === 0) {
        await app.orm.em
          .getConnection()
          .execute(
            `update work_request set status = 'ASSIGNED', worker_id = (select id from worker order by id limit 1 offset ?) where id = ?`,
            [created % 10, Number(r.createWorkRequest.id)],
          );
      }
    }
  }

  const QUERY = `{ workRequests(first: 100) { edges { node { id status priority workspace { name scope isPublic } createdBy { username }
    worker { name status activeWorkCount pool { name } } dependsOn providedTags { tag } requiredTags { tag } } } } }`;

  it('costs the same few statements for 6 requests as for 18', async () => {
    for (let i = 0; i < 3; i++)
      await gql(`mutation($n: String!) { createWorkspace(input: { name: $n }) { __typename } }`, { n: `wr/ws-${i}` });
    await growWorkersTo(10);
    await growRequestsTo(6);
    const few = await statementsOf(QUERY);
    expect(few.data.workRequests.edges).toHaveLength(6);
    await growRequestsTo(18);
    const many = await statementsOf(QUERY);
    const nodes = many.data.workRequests.edges.map((e: { node: Record<string, any> }) => e.node);
    expect(nodes).toHaveLength(18);
    expect(nodes.filter((n: { worker: unknown }) => n.worker !== null)).toHaveLength(9);
    expect(nodes[0]).toMatchObject({
      workspace: { name: 'wr/ws-2', scope: 'wr' },
      createdBy: { username: 'admin' },
      worker: null,
    });
    expect(nodes[1]).toMatchObject({
      workspace: { name: 'wr/ws-1' },
      status: 'ASSIGNED',
      worker: {
        name: expect.stringMatching(/^w-/),
        status: 'DISCONNECTED',
        activeWorkCount: expect.any(Number),
        pool: { name: expect.stringMatching(/^pool-/) },
      },
    });

    // The token, the requests, and one batch each for workspaces, users, workers, their pools, their active work and the dependencies.
    expect(few.statements.length, few.statements.join('\n')).toBeLessThanOrEqual(8);
    expect(many.statements.length, many.statements.join('\n')).toBe(few.statements.length);
  });
});

describe('workflows and their children', () => {
  const QUERY = `{ workRequests(first: 100, filter: { taskName: "sbuild", status: [RUNNING] }) { edges { node { id children(first: 10) { edges { node { id taskName parent { id } } } pageInfo { hasNextPage } } } } } }`;
  let made = 0;
  async function growWorkflowsTo(total: number): Promise<void> {
    if (made === 0) {
      await gql(`mutation { createWorkspace(input: { name: "flows/main" }) { __typename } }`);
      for (const a of ['amd64', 'arm64'])
        await gql(
          `mutation($a: String!) { createEnvironment(input: { codename: "trixie", architecture: $a }) { __typename } }`,
          { a },
        );
    }
    for (; made < total; made++) {
      const r = await gql(
        `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { __typename ... on Error { message } } }`,
        {
          i: {
            workspace: 'flows/main',
            taskType: 'workflow',
            taskName: 'sbuild',
            taskData: {
              input: { source_package: `pkg-${made}` },
              target_distribution: 'debian:trixie',
              architectures: ['amd64', 'arm64'],
            },
          },
        },
      );
      expect(r.createWorkRequest.__typename, r.createWorkRequest.message).toBe('WorkRequest');
    }
  }

  it('cost the same few statements for 2 workflows as for 8, children and their parent included', async () => {
    await growWorkflowsTo(2);
    const few = await statementsOf(QUERY);
    await growWorkflowsTo(8);
    const many = await statementsOf(QUERY);
    const nodes = many.data.workRequests.edges.map((e: { node: Record<string, any> }) => e.node);
    expect(nodes).toHaveLength(8);
    for (const n of nodes)
      expect(n.children.edges.map((e: { node: Record<string, any> }) => [e.node.taskName, e.node.parent.id])).toEqual([
        ['sbuild', n.id],
        ['sbuild', n.id],
      ]);
    // The token, the workflows, the children's page and rows, and their parents.
    expect(few.statements.length, few.statements.join('\n')).toBeLessThanOrEqual(6);
    expect(many.statements.length, many.statements.join('\n')).toBe(few.statements.length);
  });
});

describe('the workspaces list', () => {
  const QUERY = '{ workspaces { name viewerRole members { user { username } role } rules { name } } }';
  let made = 0;
  async function growWorkspacesTo(total: number): Promise<void> {
    for (; made < total; made++) {
      const name = `many/ws-${String(made).padStart(2, '0')}`;
      await gql(`mutation($n: String!) { createWorkspace(input: { name: $n }) { __typename } }`, { n: name });
      await gql(
        `mutation($n: String!) { createTaskRule(input: { workspace: $n, name: "r", requiredTags: ["site:x"] }) { __typename } }`,
        { n: name },
      );
    }
  }

  it('costs the same few statements for 3 workspaces as for 9', async () => {
    await growWorkspacesTo(3);
    const few = await statementsOf(QUERY);
    await growWorkspacesTo(9);
    const many = await statementsOf(QUERY);
    expect(many.data.workspaces.filter((w: { name: string }) => w.name.startsWith('many/'))).toHaveLength(9);
    expect(few.statements.length, few.statements.join('\n')).toBeLessThanOrEqual(8);
    expect(many.statements.length, many.statements.join('\n')).toBe(few.statements.length);
  });
});

describe('the groups list', () => {
  it('costs the same few statements for 2 groups as for 8', async () => {
    const QUERY = '{ groups(scope: "g") { name workspace { name } members { username } } }';
    const counts: number[] = [];
    for (const total of [2, 8]) {
      for (let i = counts.length ? 2 : 0; i < total; i++) {
        const r = await gql(
          `mutation($n: String!) { createGroup(input: { scope: "g", name: $n }) { ... on Group { id } } }`,
          { n: `grp-${i}` },
        );
        await gql(`mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["admin"] }) { __typename } }`, {
          g: r.createGroup.id,
        });
      }
      const { data, statements } = await statementsOf(QUERY);
      expect(data.groups).toHaveLength(total);
      counts.push(statements.length);
    }
    expect(counts[0]).toBeLessThanOrEqual(5);
    expect(counts[1]).toBe(counts[0]);
  });
});

describe('the pools list with their instances', () => {
  it('costs the same few statements for 2 pools as for 8', async () => {
    const QUERY = `{ workerPools { name degraded monthRuntimeSeconds specifications { concurrency }
      instances(first: 2) { edges { node { name state runtimeSeconds worker { name status } pool { name } } } } } }`;
    const counts: number[] = [];
    for (const total of [2, 8]) {
      for (let i = counts.length ? 2 : 0; i < total; i++) {
        await gql(
          `mutation($n: String!) { createWorkerPool(input: { name: $n, providerType: "local" }) { __typename } }`,
          { n: `inst-${i}` },
        );
        // Three instances each, with their workers, as the provisioner records them.
        for (let k = 0; k < 3; k++) {
          await app.orm.em.getConnection().execute(
            `with p as (select id from worker_pool where name = ?),
                  w as (insert into worker (name, type, pool_id, registered_at, instance_created_at) select ?, 'worker', id, now(), now() from p returning id, pool_id)
             insert into instance (name, pool_id, worker_id, state, requested_at) select ?, pool_id, id, 'LAUNCHING', now() from w`,
            [`inst-${i}`, `inst-${i}-${k}`, `inst-${i}-${k}`],
          );
        }
      }
      const { data, statements } = await statementsOf(QUERY);
      const mine = data.workerPools.filter((p: { name: string }) => p.name.startsWith('inst-'));
      expect(mine).toHaveLength(total);
      // Each pool's page: its two newest instances, with their workers and pool.
      expect(mine[1].instances.edges.map((e: { node: Record<string, any> }) => e.node)).toEqual([
        {
          name: 'inst-1-2',
          state: 'LAUNCHING',
          runtimeSeconds: expect.any(Number),
          worker: { name: 'inst-1-2', status: 'DISCONNECTED' },
          pool: { name: 'inst-1' },
        },
        {
          name: 'inst-1-1',
          state: 'LAUNCHING',
          runtimeSeconds: expect.any(Number),
          worker: { name: 'inst-1-1', status: 'DISCONNECTED' },
          pool: { name: 'inst-1' },
        },
      ]);
      counts.push(statements.length);
    }
    expect(counts[0]).toBeLessThanOrEqual(8);
    expect(counts[1]).toBe(counts[0]);
  });
});

describe('a created request', () => {
  it('answers its workspace and its creator from what the creation read, not by reading them again', async () => {
    await gql(`mutation { createWorkspace(input: { name: "answers/main" }) { __typename } }`);
    const CREATE = `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) {
      __typename ... on WorkRequest { id status workspace { name } createdBy { username } } } }`;
    await settle();
    ormLines = [];
    const data = await gql(CREATE, {
      i: { workspace: 'answers/main', taskType: 'worker', taskName: 'noop', taskData: {} },
    });
    const statements = ormLines.filter((line) => line.includes('[query]'));
    expect(data.createWorkRequest).toMatchObject({
      __typename: 'WorkRequest',
      workspace: { name: 'answers/main' },
      createdBy: { username: 'admin' },
    });
    // The workspace is read once, by its name, to check the input; the user came with the token.
    expect(statements.filter((s) => /from "workspace"/.test(s))).toHaveLength(1);
    expect(statements.filter((s) => /from "app_user"/.test(s))).toEqual([]);
    // An admin sees and may submit everywhere: neither its memberships nor its role are read (its
    // groups are, for the task rules that name the submitter's groups).
    expect(statements.filter((s) => /workspace_member/.test(s))).toEqual([]);
  });
});
