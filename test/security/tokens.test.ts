import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/core/config/config.js';
import { ConfigError } from '../../src/core/config/variables.js';
import { createLogger } from '../../src/core/log.js';
import { ADMIN_TOKEN, useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS } from '../helpers/fixtures.js';
import { httpGql, startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { collect, wsClient } from '../helpers/ws.js';

// docs/design.md: limits and tokens: tokens can be revoked and rotated and may expire; a revoked or disabled token's open
// WebSocket is closed and no event reaches it after; TAGSCHED_ADMIN_TOKEN must be long, and a new
// value revokes the old. Through HTTP and WebSocket, against the real app and a second real server
// process on the same database.
const t = useTestApp();
let url: string;
let other: ServerProcess;
const META = {
  architectures: ['amd64'],
  executors: ['unshare'],
  tasks: [{ type: 'worker', name: 'noop', version: 1 }],
};
const TOKEN_FIELDS = 'id kind label username worker createdAt expiresAt revokedAt valid';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function newUser(name: string): Promise<string> {
  return (
    await t.gql(`mutation($u: String!) { createUser(input: { username: $u }) { ... on UserTokenPayload { token } } }`, {
      u: name,
    })
  ).data!.createUser.token as string;
}
async function tokenIdOf(token: string): Promise<string> {
  return (await t.gql(`{ tokens { id } }`, {}, token)).data!.tokens[0].id as string;
}
async function noop(token: string): Promise<string> {
  const r = await t.gql(
    `mutation { createWorkRequest(input: { workspace: "sec/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } ${ERROR_FIELDS} } }`,
    {},
    token,
  );
  return r.data!.createWorkRequest.id as string;
}
const me = (token: string, at = t) => at.gql(`{ me { username } }`, {}, token);

beforeAll(async () => {
  ({ url } = await t.app.start());
  await t.gql(`mutation { createWorkspace(input: { name: "sec/main" }) { __typename } }`);
  other = await startServerProcess({
    DATABASE_URL: t.dbUrl,
    TAGSCHED_ADMIN_TOKEN: ADMIN_TOKEN,
    TAGSCHED_SECRET_KEY: 'test-secret-key',
    TAGSCHED_SCHEDULER: 'manual',
  });
});
afterAll(async () => {
  await other?.stop();
});

describe('revokeToken', () => {
  it('refuses the token at once over HTTP, and closes its open sockets here and in the other process', async () => {
    const alice = await newUser('rev-alice');
    await t.gql(
      `mutation { setWorkspaceMember(input: { workspace: "sec/main", username: "rev-alice" }) { __typename } }`,
    );
    const here = wsClient(url, alice);
    const there = wsClient(other.url, alice);
    const subHere = collect(here.client, `subscription { workRequestChanged(workspace: "sec/main") { id } }`);
    const subThere = collect(there.client, `subscription { workRequestChanged(workspace: "sec/main") { id } }`);
    await sleep(300); // both subscriptions listening
    await noop(alice);
    await subHere.next(1);
    await subThere.next(1);

    const id = await tokenIdOf(alice);
    const revoked = await t.gql(
      `mutation($i: ID!) { revokeToken(input: { id: $i }) { __typename ... on Token { id revokedAt valid } ${ERROR_FIELDS} } }`,
      { i: id },
      alice,
    );
    expect(revoked.data!.revokeToken).toMatchObject({ __typename: 'Token', id, valid: false });
    const revokedAt = Date.now();
    const [closedHere, closedThere] = await Promise.all([here.closed, there.closed]);
    const tookMs = Date.now() - revokedAt;
    expect(closedHere.code).toBe(4401);
    expect(closedThere.code).toBe(4401);
    expect(closedThere.reason).toMatch(/revoked/);
    console.info(`sockets of a revoked token closed in ${tookMs} ms (this process and another)`);
    expect((await me(alice)).status).toBe(401);
    expect((await httpGql(other.url, `{ me { username } }`, {}, alice)).status).toBe(401);
    // Nothing after the revocation.
    await noop(ADMIN_TOKEN);
    await sleep(300);
    expect(subHere.items).toHaveLength(1);
    expect(subThere.items).toHaveLength(1);
  });

  it('sends no event to a socket whose token was disabled in the database behind the service’s back', async () => {
    const bob = await newUser('rev-bob');
    await t.gql(
      `mutation { setWorkspaceMember(input: { workspace: "sec/main", username: "rev-bob" }) { __typename } }`,
    );
    const conn = wsClient(url, bob);
    const sub = collect(conn.client, `subscription { workRequestChanged(workspace: "sec/main") { id taskData } }`);
    await sleep(300);
    await noop(bob);
    await sub.next(1);
    await t.sql(
      `update token set enabled = false where user_id = (select id from app_user where username = 'rev-bob')`,
    );
    await noop(ADMIN_TOKEN);
    const closed = await conn.closed;
    expect(closed.code).toBe(4401);
    expect(sub.items).toHaveLength(1);
  });

  it('stops a revoked worker from being pushed work: its socket is closed and its assignments wait', async () => {
    const token = (
      await t.gql(`mutation { registerWorker(input: { name: "rev-w" }) { ... on WorkerTokenPayload { token } } }`)
    ).data!.registerWorker.token as string;
    await t.gql(
      `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
      { m: META },
      token,
    );
    const conn = wsClient(url, token);
    const sub = collect(conn.client, `subscription { assignments { id taskData } }`);
    await sleep(300);
    const [{ id }] = await t.sql<{ id: number }>(
      `select t.id from token t join worker w on w.id = t.worker_id where w.name = 'rev-w'`,
    );
    const res = await t.gql(`mutation($i: ID!) { revokeToken(input: { id: $i }) { __typename } }`, { i: String(id) });
    expect(res.data!.revokeToken.__typename).toBe('Token');
    expect((await conn.closed).code).toBe(4401);
    await noop(ADMIN_TOKEN);
    await t.app.scheduler.runPass();
    await sleep(200);
    expect(sub.items).toEqual([]);
  });

  it('lets a user revoke only their own tokens; others look missing', async () => {
    const carol = await newUser('rev-carol');
    const dave = await newUser('rev-dave');
    const daveId = await tokenIdOf(dave);
    const refused = await t.gql(
      `mutation($i: ID!) { revokeToken(input: { id: $i }) { __typename ${ERROR_FIELDS} } }`,
      { i: daveId },
      carol,
    );
    expect(refused.data!.revokeToken).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    expect((await me(dave)).status).toBe(200);
    const anonymous = await t.gql(`mutation { revokeToken(input: {}) { __typename ${ERROR_FIELDS} } }`, {}, null);
    expect(anonymous.data!.revokeToken.code).toBe('UNAUTHENTICATED');
    const bad = await t.gql(`mutation { revokeToken(input: { id: "x1" }) { __typename ${ERROR_FIELDS} } }`, {}, carol);
    expect(bad.data!.revokeToken).toMatchObject({ code: 'INVALID_INPUT', path: 'input.id' });
  });
});

describe('rotateToken', () => {
  it('gives a new value once and revokes the old one', async () => {
    const erin = await newUser('rot-erin');
    const rotated = await t.gql(
      `mutation { rotateToken(input: {}) { __typename ... on TokenValuePayload { value token { ${TOKEN_FIELDS} } } ${ERROR_FIELDS} } }`,
      {},
      erin,
    );
    const payload = rotated.data!.rotateToken;
    expect(payload.__typename).toBe('TokenValuePayload');
    expect(payload.value).toMatch(/^tsk_user_/);
    expect(payload.token).toMatchObject({ kind: 'USER', username: 'rot-erin', valid: true, revokedAt: null });
    expect((await me(erin)).status).toBe(401);
    expect((await me(payload.value)).data!.me.username).toBe('rot-erin');
    const listed = await t.gql(`{ tokens { ${TOKEN_FIELDS} } }`, {}, payload.value);
    expect(listed.data!.tokens.map((tk: { valid: boolean }) => tk.valid)).toEqual([true, false]);
    expect(JSON.stringify(listed.data)).not.toContain(payload.value);
    const again = await t.gql(
      `mutation($i: ID!) { rotateToken(input: { id: $i }) { __typename ${ERROR_FIELDS} } }`,
      { i: listed.data!.tokens[1].id },
      payload.value,
    );
    expect(again.data!.rotateToken.code).toBe('INVALID_STATE');
  });

  it('keeps a worker usable: the new value reconnects as the same worker and gets its unacknowledged work', async () => {
    const old = (
      await t.gql(`mutation { registerWorker(input: { name: "rot-w" }) { ... on WorkerTokenPayload { token } } }`)
    ).data!.registerWorker.token as string;
    await t.gql(
      `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
      { m: META },
      old,
    );
    const conn = wsClient(url, old);
    const sub = collect(conn.client, `subscription { assignments { id } }`);
    await sleep(300);
    await noop(ADMIN_TOKEN);
    await t.app.scheduler.runPass();
    const [{ assignments }] = await sub.next(1);
    const id = assignments.id as string;
    const rotated = await t.gql(
      `mutation { rotateToken(input: {}) { __typename ... on TokenValuePayload { value token { worker kind } } ${ERROR_FIELDS} } }`,
      {},
      old,
    );
    const { value, token } = rotated.data!.rotateToken;
    expect(token).toEqual({ worker: 'rot-w', kind: 'WORKER' });
    expect((await conn.closed).code).toBe(4401);
    // The agent, given the new value, is the same worker: its unacknowledged assignment comes again.
    const fresh = wsClient(url, value);
    const again = collect(fresh.client, `subscription { assignments { id } }`);
    expect(await again.next(1)).toEqual([{ assignments: { id } }]);
    const started = await t.gql(
      `mutation($i: ID!) { startWorkRequest(input: { id: $i }) { __typename } }`,
      { i: id },
      value,
    );
    expect(started.data!.startWorkRequest.__typename).toBe('WorkRequest');
    await fresh.client.dispose();
  });
});

describe('expiry', () => {
  it('refuses an expired token over HTTP and closes its socket when it expires', async () => {
    await newUser('exp-frank');
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const created = await t.gql(
      `mutation($e: DateTime) { createToken(input: { username: "exp-frank", label: "short", expiresAt: $e }) { __typename ... on TokenValuePayload { value token { expiresAt label } } ${ERROR_FIELDS} } }`,
      { e: expiresAt },
    );
    const { value, token } = created.data!.createToken;
    expect(token).toEqual({ expiresAt, label: 'short' });
    expect((await me(value)).data!.me.username).toBe('exp-frank');
    const conn = wsClient(url, value);
    collect(conn.client, `subscription { workerChanged { name } }`);
    const closed = await conn.closed;
    expect(closed.code).toBe(4401);
    expect(closed.reason).toMatch(/expired/);
    const refused = await me(value);
    expect(refused.status).toBe(401);
    expect(refused.errors![0].message).toMatch(/expired/);
  });

  it('refuses an expiry in the past', async () => {
    const past = await t.gql(
      `mutation { createToken(input: { expiresAt: "2001-01-01T00:00:00Z" }) { __typename ${ERROR_FIELDS} } }`,
    );
    expect(past.data!.createToken).toMatchObject({ code: 'INVALID_INPUT', path: 'input.expiresAt' });
  });
});

describe('TAGSCHED_ADMIN_TOKEN', () => {
  it('must be long enough to be a secret', async () => {
    expect(() => loadConfig({ TAGSCHED_ADMIN_TOKEN: 'a' })).toThrow(ConfigError);
    expect(() => loadConfig({ TAGSCHED_ADMIN_TOKEN: 'a' })).toThrow(/at least 32/);
    const refused = await startServerProcess({ DATABASE_URL: t.dbUrl, TAGSCHED_ADMIN_TOKEN: 'short' }, 30_000).then(
      () => null,
      (err: Error) => err.message,
    );
    expect(refused).toMatch(/exited with 2/);
    expect(refused).toMatch(/tagsched: TAGSCHED_ADMIN_TOKEN is 5 characters long; it must have at least 32/);
  });

  it('revokes the previous value when it changes', async () => {
    const next = 'tsk_admin_the-next-admin-token-0123456789';
    const second = await buildApp(
      loadConfig(
        {},
        {
          server: {
            databaseUrl: t.dbUrl,
            dataDir: path.join(os.tmpdir(), 'tagsched-test'),
            adminToken: next,
            secretKey: 'test-secret-key',
            port: 0,
            host: '127.0.0.1',
          },
          scheduler: { automatic: false },
        },
      ),
      { log: createLogger('silent') },
    );
    try {
      const old = await t.gql(`{ me { username } }`, {}, ADMIN_TOKEN);
      expect(old.status).toBe(401);
      expect(old.errors![0].message).toMatch(/revoked/);
      expect((await t.gql(`{ me { username } }`, {}, next)).data!.me.username).toBe('admin');
    } finally {
      await second.stop();
      // Put the harness's token back for the other tests of this file.
      await t.sql(
        `update token set revoked_at = null where label = 'TAGSCHED_ADMIN_TOKEN' and hash = encode(sha256(?::bytea), 'hex')`,
        [ADMIN_TOKEN],
      );
    }
  });
});
