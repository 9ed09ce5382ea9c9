import http from 'node:http';
import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import WebSocket from 'ws';
import { buildApp, type App } from '../../src/server/app.js';
import { loadConfig } from '../../src/core/config/config.js';
import { createLogger } from '../../src/core/log.js';
import { until } from '../faults/harness.js';
import { ADMIN_TOKEN, secondAppConfig, useTestApp } from '../helpers/app.js';
import { collect, initSocket, wsClient } from '../helpers/ws.js';

// docs/design.md: limits and tokens: every operation is bounded before it runs, over HTTP and over WebSocket, with an error
// naming the limit, while a plain query from another client still answers. This app has low limits
// where a test needs to reach them; `defaults` is a second server on the same database with none changed.
const t = useTestApp({
  limits: {
    maxConnectionsPerToken: 3,
    maxSubscriptionsPerConnection: 2,
    authFailuresPerMinute: 5,
    anonymousRequestsPerMinute: 20,
    anonymousConnectionsPerAddress: 3,
  },
  api: { introspection: false, fieldSuggestions: false },
});
let url: string;
let defaults: App;
let defaultsUrl: string;

/** A GET of a path of the test server from a chosen local address, without a token. */
function fetchFrom(from: string, pathname: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const u = new URL(pathname, url);
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method: 'GET', localAddress: from },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A raw HTTP POST from a chosen local address (127.0.0.x are all this machine), without fetch's retries or limits. */
function post(
  target: string,
  body: string,
  opts: { token?: string; from?: string; headers?: Record<string, string> } = {},
) {
  return new Promise<{ status: number; json: Record<string, any> }>((resolve, reject) => {
    const u = new URL(target);
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        localAddress: opts.from,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
          ...opts.headers,
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode!, json: text ? (JSON.parse(text) as Record<string, any>) : {} }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
const gql = (query: string, opts: Parameters<typeof post>[2] = {}, variables: Record<string, unknown> = {}) =>
  post(url, JSON.stringify({ query, variables }), { token: ADMIN_TOKEN, ...opts });
const limitOf = (res: { json: Record<string, any> }) =>
  (res.json.errors as { extensions?: { code?: string; limit?: string } }[] | undefined)?.map(
    (e) => `${e.extensions?.code}:${e.extensions?.limit}`,
  );
const plain = `{ workerPools { name } }`;

beforeAll(async () => {
  ({ url } = await t.app.start());
  defaults = await buildApp(secondAppConfig(t, { scheduler: { automatic: false } }), { log: createLogger('silent') });
  ({ url: defaultsUrl } = await defaults.start());
});
afterAll(async () => {
  await defaults?.stop();
});

describe('amplified queries are refused, a plain one still answers', () => {
  it('1,000 aliases of provisioningDemand, four times at once: refused, and another client still answers', async () => {
    const aliases = (n: number) =>
      `{ ${Array.from({ length: n }, (_, i) => `d${i}: provisioningDemand { pendingTotal }`).join(' ')} }`;
    const bombs = Array.from({ length: 4 }, () => gql(aliases(1000), { token: undefined }));
    const [other, ...refused] = await Promise.all([gql(plain, { from: '127.0.0.2' }), ...bombs]);
    for (const r of refused) {
      expect(r.status).toBeLessThan(500);
      expect(limitOf(r)?.[0]).toMatch(/^LIMIT_EXCEEDED:TAGSCHED_MAX_(TOKENS|ALIASES)$/); // 6,000 tokens: cut short while parsing
    }
    expect(other.status).toBe(200);
    expect(other.json.data).toEqual({ workerPools: [] });
    const hundred = await gql(aliases(100));
    expect(limitOf(hundred)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_ALIASES']);
    expect(hundred.json.errors[0].message).toMatch(/Aliases limit of 20 exceeded, found 100/);
  });

  it('a few aliases of provisioningDemand: refused by the cost limit, which names its setting', async () => {
    const query = `{ ${Array.from({ length: 5 }, (_, i) => `d${i}: provisioningDemand { pendingTotal }`).join(' ')} }`;
    const refused = await gql(query);
    expect(limitOf(refused)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_COST']);
    expect(refused.json.errors[0].message).toMatch(/Query cost limit of 20000 exceeded, found 25005/);
    const one = await gql(`{ provisioningDemand { pendingTotal } }`);
    expect(one.json.data).toEqual({ provisioningDemand: { pendingTotal: 0 } });
  });

  it('lists cost their page size', async () => {
    const fields = 'id status diagnosis { state } candidateWorkers(first: 20) { name status }';
    const big = await gql(`{ workRequests(first: 500) { edges { node { ${fields} } } } }`);
    expect(limitOf(big)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_COST']);
    expect(big.json.errors[0].extensions.found).toBeGreaterThan(20_000);
    const page = await gql(`{ workRequests(first: 20) { edges { node { ${fields} } } } }`);
    expect(page.json.errors).toBeUndefined();
    const candidates = await gql(
      `query($ids: [ID!]!) { candidateWorkers(workRequestIds: $ids) { count } }`,
      {},
      { ids: Array.from({ length: 2000 }, (_, i) => String(i + 1)) },
    );
    expect(limitOf(candidates)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_COST']);
  });

  it('a document nested 5,000 deep is cut short by the token limit, no crash', async () => {
    const deep = `{ ${'workers { edges { node { pool { '.repeat(1250)} name ${'} } } }'.repeat(1250)} }`;
    const [refused, other] = await Promise.all([gql(deep, { token: undefined }), gql(plain, { from: '127.0.0.2' })]);
    expect(refused.status).toBeLessThan(500);
    expect(limitOf(refused)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_TOKENS']);
    expect(other.json.data).toEqual({ workerPools: [] });
  });

  it('a deep query within the token limit is refused by the depth limit', async () => {
    // What clients ask for in practice fits: a page of requests with their workspace's members.
    const usual = `{ workRequests { edges { node { workspace { members { user { username } } } worker { pool { name } } createdBy { username } } } } }`;
    expect((await gql(usual)).json.errors).toBeUndefined();
    const nested = (n: number): string => (n === 0 ? 'name' : `pool { ${nested(n - 1)} }`);
    const query = `{ workers { edges { node { ${nested(20)} } } } }`;
    const refused = await gql(query);
    expect(limitOf(refused)).toContain('LIMIT_EXCEEDED:TAGSCHED_MAX_DEPTH');
  });

  it('too many directives are refused', async () => {
    const query = `{ workerPools { name ${Array.from({ length: 30 }, () => '@include(if: true)').join(' ')} } }`;
    expect(limitOf(await gql(query))).toContain('LIMIT_EXCEEDED:TAGSCHED_MAX_DIRECTIVES');
  });

  it('a body over the size limit is refused before it is read, with 413', async () => {
    const body = JSON.stringify({ query: plain, variables: { pad: 'x'.repeat(2 * 1024 * 1024) } });
    const refused = await post(url, body, { token: ADMIN_TOKEN });
    expect(refused.status).toBe(413);
    expect(limitOf(refused)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_BODY_BYTES']);
    expect((await gql(plain)).json.data).toEqual({ workerPools: [] });
  });
});

describe('nested lists multiply (issue 21, item 1)', () => {
  it('a workspace owner adds 10 rules to a public workspace; the anonymous cycle rules → workspace → rules 6 deep is refused by the cost, and the 51st rule by its maximum', async () => {
    const owner = (
      await t.gql(`mutation { createUser(input: { username: "rule-owner" }) { ... on UserTokenPayload { token } } }`)
    ).data!.createUser.token as string;
    expect(
      (await t.gql(`mutation { createWorkspace(input: { name: "probe/open", isPublic: true }) { __typename } }`)).data!
        .createWorkspace.__typename,
    ).toBe('Workspace');
    const member = await t.gql(
      `mutation { setWorkspaceMember(input: { workspace: "probe/open", username: "rule-owner", role: OWNER }) { __typename } }`,
    );
    expect(member.data!.setWorkspaceMember.__typename).toBe('Workspace');
    const addRule = (i: number) =>
      gql(
        `mutation { createTaskRule(input: { workspace: "probe/open", name: "r${i}", providedTags: ["task:team:r${i}"] }) { __typename ... on Error { code message } } }`,
        {
          token: owner,
        },
      );
    for (let i = 0; i < 10; i++) expect((await addRule(i)).json.data.createTaskRule.__typename).toBe('TaskRule');

    const nest = (n: number): string => (n === 0 ? 'name' : `rules { name workspace { ${nest(n - 1)} } }`);
    const probe = await gql(`{ workspaces { ${nest(6)} } }`, { token: undefined, from: '127.0.0.5' });
    expect(probe.status).toBeLessThan(500);
    expect(probe.json.data).toBeUndefined();
    expect(limitOf(probe)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_COST']);
    expect(probe.json.errors[0].message).toMatch(/^Query cost limit of 20000 exceeded, found \d+/);
    expect(probe.json.errors[0].extensions.found).toBeGreaterThan(1_000_000); // 10 rules counted at each of 6 levels: 10^6 and more
    // 20 aliases of 5 levels in one request: refused as well.
    const aliases = `{ ${Array.from({ length: 20 }, (_, i) => `a${i}: workspaces { ${nest(5)} }`).join(' ')} }`;
    const many = await gql(aliases, { token: undefined, from: '127.0.0.5' });
    expect(many.status).toBeLessThan(500);
    expect(limitOf(many)).toEqual(['LIMIT_EXCEEDED:TAGSCHED_MAX_COST']);
    expect(many.json.errors[0].extensions.found).toBeGreaterThan(20 * 100_000);
    // One level of the same lists answers.
    const one = await gql(`{ workspace(name: "probe/open") { rules { name } } }`, {
      token: undefined,
      from: '127.0.0.5',
    });
    expect(one.json.data.workspace.rules).toHaveLength(10);

    for (let i = 10; i < 50; i++) expect((await addRule(i)).json.data.createTaskRule.__typename).toBe('TaskRule');
    const past = await addRule(50);
    expect(past.json.data.createTaskRule).toEqual({
      __typename: 'InputError',
      code: 'INVALID_RULE',
      message: 'input: a workspace holds at most 50 rules',
    });
  });
});

describe('the same limits over WebSocket', () => {
  it('refuses an alias bomb and a document nested 5,000 deep sent over graphql-ws', async () => {
    const { client } = wsClient(url, ADMIN_TOKEN);
    try {
      const aliases = collect(
        client,
        `subscription { ${Array.from({ length: 100 }, (_, i) => `w${i}: workerChanged { name }`).join(' ')} }`,
      );
      await expect(aliases.next(1, 5_000)).rejects.toThrow(/TAGSCHED_MAX_ALIASES|Aliases limit/);
      const deep = collect(
        client,
        `query { ${'workers { edges { node { pool { '.repeat(1250)} name ${'} } } }'.repeat(1250)} }`,
      );
      await expect(deep.next(1, 5_000)).rejects.toThrow(/Token limit|TAGSCHED_MAX_TOKENS/);
      const costly = collect(
        client,
        `query { ${Array.from({ length: 5 }, (_, i) => `d${i}: provisioningDemand { pendingTotal }`).join(' ')} }`,
      );
      await expect(costly.next(1, 5_000)).rejects.toThrow(/TAGSCHED_MAX_COST/);
      const ok = collect(client, plain);
      expect(await ok.next(1)).toEqual([{ workerPools: [] }]);
    } finally {
      await client.dispose();
    }
  });

  it('closes the socket that sends a message over the size limit', async () => {
    const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    await new Promise((r) => socket.once('open', r));
    const closed = new Promise<number>((r) => socket.once('close', (code) => r(code)));
    socket.send(JSON.stringify({ type: 'connection_init', payload: { pad: 'x'.repeat(2 * 1024 * 1024) } }));
    expect(await closed).toBe(1009); // "message too big"
  });

  it('bounds the connections of one token (per process) and the operations of one connection', async () => {
    const user = (
      await t.gql(`mutation { createUser(input: { username: "many" }) { ... on UserTokenPayload { token } } }`)
    ).data!.createUser.token as string;
    const conns = [wsClient(url, user), wsClient(url, user), wsClient(url, user)];
    const subs = conns.map((c) => collect(c.client, `subscription { workerChanged { name } }`));
    await new Promise((r) => setTimeout(r, 300));
    const fourth = wsClient(url, user);
    collect(fourth.client, plain);
    const refused = await fourth.closed;
    expect(refused.code).toBe(4429);
    expect(refused.reason).toMatch(/TAGSCHED_MAX_CONNECTIONS_PER_TOKEN/);
    // Two operations per connection here: the third is refused, the connection stays.
    const second = collect(conns[0].client, `subscription { workRequestChanged { id } }`);
    const third = collect(conns[0].client, plain);
    await expect(third.next(1, 5_000)).rejects.toThrow(/TAGSCHED_MAX_SUBSCRIPTIONS_PER_CONNECTION/);
    second.dispose();
    subs[0].dispose();
    const after = collect(conns[0].client, plain);
    expect(await after.next(1)).toEqual([{ workerPools: [] }]);
    for (const c of conns) await c.client.dispose();
  });
});

describe('failed authentications are rate limited per client address', () => {
  it('answers 429 over HTTP and 4429 over WebSocket after 5 failures, while other addresses and anonymous calls go on', async () => {
    const from = '127.0.0.3';
    for (let i = 0; i < 5; i++) {
      const r = await gql(plain, { from, token: `tsk_user_guess-${i}-0000000000000000000000` });
      expect(r.status).toBe(401);
    }
    const throttled = await gql(plain, { from, token: `tsk_user_guess-5-0000000000000000000000` });
    expect(throttled.status).toBe(429);
    expect(throttled.json.errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(throttled.json.errors[0].message).toMatch(/TAGSCHED_AUTH_FAILURES_PER_MINUTE/);
    // Even the right token is refused from that address for now: guessing must not tell right from wrong.
    expect((await gql(plain, { from, token: ADMIN_TOKEN })).status).toBe(429);
    expect((await gql(plain, { from, token: undefined })).json.data).toEqual({ workerPools: [] });
    expect((await gql(plain, { from: '127.0.0.4' })).json.data).toEqual({ workerPools: [] });
    const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws', { localAddress: from });
    await new Promise((r) => socket.once('open', r));
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      socket.once('close', (code, reason) => r({ code, reason: reason.toString() })),
    );
    socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${ADMIN_TOKEN}` } }));
    const event = await closed;
    expect(event.code).toBe(4429);
    expect(event.reason).toMatch(/too many failed authentications/);
  });
});

describe('the failure throttle reserves each attempt before its lookup', () => {
  it('300 wrong tokens sent at once from one address: exactly 5 are looked up (401), the rest refused (429)', async () => {
    const from = '127.0.0.5';
    // Token lookups are held (the token table locked) until every guess has arrived, so that all 300 are
    // under way at once, as from a fast client: only the reservation keeps the lookups at the limit.
    const holder = new pg.Client({ connectionString: t.dbUrl });
    await holder.connect();
    let answers: Awaited<ReturnType<typeof gql>>[];
    try {
      await holder.query('begin; lock table token in access exclusive mode');
      const sent = Promise.all(
        Array.from({ length: 300 }, (_, i) => gql(plain, { from, token: `tsk_user_burst-${i}-000000000000000000000` })),
      );
      await until('the first lookups to wait for the lock', async () => {
        const { rows } = await holder.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
        );
        return rows[0].n >= 1;
      });
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await holder.query('commit');
      answers = await sent;
    } finally {
      await holder.end();
    }
    const counts = answers.reduce<Record<number, number>>((n, r) => ({ ...n, [r.status]: (n[r.status] ?? 0) + 1 }), {});
    expect(counts).toEqual({ 401: 5, 429: 295 });
  });

  it('50 good tokens sent at once from one address are all answered: a burst of good tokens is queued, never refused', async () => {
    const from = '127.0.0.6';
    const answers = await Promise.all(Array.from({ length: 50 }, () => gql(plain, { from, token: ADMIN_TOKEN })));
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    expect((await gql(plain, { from, token: 'tsk_user_after-burst-00000000000000000000' })).status).toBe(401);
  });
});

/** A raw graphql-ws connection from a chosen local address: initSocket's, and whether it was acknowledged. */
async function rawSocket(from: string, token: string | null, base = url) {
  const raw = await initSocket(base, token, { localAddress: from });
  const acked = await Promise.race([
    until('an ack', () => raw.messages.some((m) => m.type === 'connection_ack')),
    raw.closed.then(() => false),
  ]);
  return { ...raw, acked };
}

describe('callers without a token are bounded per address', () => {
  it('HTTP: 20 requests a minute, then 429 with Retry-After; a token, another address and the probes go on', async () => {
    const from = '127.0.0.7';
    for (let i = 0; i < 20; i++) expect((await gql(plain, { from, token: undefined })).status).toBe(200);
    const refused = await gql(plain, { from, token: undefined });
    expect(refused.status).toBe(429);
    expect(refused.json.errors[0].extensions).toEqual({
      code: 'RATE_LIMITED',
      limit: 'TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE',
    });
    const page = await fetchFrom(from, '/-/status/workers/');
    expect(page.status).toBe(429);
    expect(page.headers['retry-after']).toMatch(/^\d+$/);
    expect(page.body).toMatch(/TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE/);
    expect((await gql(plain, { from })).status).toBe(200); // with the admin token
    expect((await gql(plain, { from: '127.0.0.8', token: undefined })).status).toBe(200);
    expect((await fetchFrom(from, '/healthz')).status).toBe(200);
  });

  it('WebSocket: 3 anonymous connections per address, the 4th closed with 4429; a token still connects; a closed one frees its place', async () => {
    const from = '127.0.0.9';
    const open = [await rawSocket(from, null), await rawSocket(from, null), await rawSocket(from, null)];
    expect(open.every((c) => c.acked)).toBe(true);
    const fourth = await rawSocket(from, null);
    expect(fourth.acked).toBe(false);
    const event = await fourth.closed;
    expect(event.code).toBe(4429);
    expect(event.reason).toMatch(/TAGSCHED_ANONYMOUS_CONNECTIONS_PER_ADDRESS/);
    const withToken = await rawSocket(from, ADMIN_TOKEN);
    expect(withToken.acked).toBe(true);
    open[0].socket.close();
    await open[0].closed;
    const again = await rawSocket(from, null);
    await until('the freed place to be taken', async () => again.acked);
    for (const c of [...open.slice(1), withToken, again]) c.socket.close();
  });

  it('WebSocket, at the default limit of 50: the 51st closed with 4429 and a reason that names the setting', async () => {
    const from = '127.0.0.11';
    const open = await Promise.all(Array.from({ length: 50 }, () => rawSocket(from, null, defaultsUrl)));
    expect(open.every((c) => c.acked)).toBe(true);
    const refused = await rawSocket(from, null, defaultsUrl);
    expect(refused.acked).toBe(false);
    expect(await refused.closed).toEqual({
      code: 4429,
      reason:
        'Too many requests: 50 connections without a token open from this address (TAGSCHED_ANONYMOUS_CONNECTIONS_PER_ADDRESS)',
    });
    for (const c of open) c.socket.close();
  });

  it('WebSocket: each anonymous operation counts as a request of its address', async () => {
    const conn = await rawSocket('127.0.0.10', null);
    // One at a time: this app lets a connection run 2 operations at once.
    for (let i = 1; i <= 21; i++) {
      conn.socket.send(JSON.stringify({ id: String(i), type: 'subscribe', payload: { query: plain } }));
      await until(`answer ${i}`, () =>
        conn.messages.some((m) => m.id === String(i) && (m.type === 'complete' || m.type === 'error')),
      );
    }
    const answers = conn.messages;
    const errors = answers.filter((m) => m.type === 'error');
    expect(errors.map((m) => m.id)).toEqual(['21']);
    expect(errors[0].payload[0].extensions).toMatchObject({ code: 'RATE_LIMITED' });
    expect(answers.filter((m) => m.type === 'next')).toHaveLength(20);
    conn.socket.close();
  });
});

describe('introspection and suggestions are settings', () => {
  it('off here: __schema is refused and errors suggest no field names', async () => {
    const intro = await gql(`{ __schema { types { name } } }`);
    expect(intro.json.errors?.[0]?.message).toMatch(/introspection/i);
    const typo = await gql(`{ workerPool { nam } }`);
    expect(JSON.stringify(typo.json.errors)).not.toMatch(/Did you mean/);
  });

  it('on by default outside production: GraphiQL’s own introspection query fits the default limits', async () => {
    const res = await post(defaultsUrl, JSON.stringify({ query: getIntrospectionQuery() }), { token: ADMIN_TOKEN });
    expect(res.json.errors).toBeUndefined();
    expect(res.json.data.__schema.queryType.name).toBe('Query');
    expect(loadConfig({ NODE_ENV: 'production' }).api).toMatchObject({ introspection: false, fieldSuggestions: false });
    expect(loadConfig({ NODE_ENV: 'production', TAGSCHED_INTROSPECTION: 'true' }).api.introspection).toBe(true);
  });
});
