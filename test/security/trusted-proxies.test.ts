import http from 'node:http';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { buildApp, type App } from '../../src/server/app.js';
import { readLimitsConfig } from '../../src/core/config/limits.js';
import { createLogger } from '../../src/core/log.js';
import { ADMIN_TOKEN, secondAppConfig, useTestApp } from '../helpers/app.js';
import { registerWorker } from '../helpers/fixtures.js';
import { captureLog } from '../helpers/log-capture.js';

// Issue 33, item 5: behind a proxy, the client is the address X-Forwarded-For names, for the
// failed-authentication throttle, the anonymous limits and the logs, but only when the peer is a trusted
// proxy. This app trusts 127.0.0.1 (TAGSCHED_TRUSTED_PROXIES=127.0.0.1), where every test request comes
// from, as through HAProxy; `direct` is a second process on the same database that trusts no one.
const capture = captureLog();
const t = useTestApp(
  {
    limits: {
      authFailuresPerMinute: 3,
      anonymousRequestsPerMinute: 5,
      trustedProxies: readLimitsConfig({ TAGSCHED_TRUSTED_PROXIES: '127.0.0.1' }).trustedProxies,
    },
  },
  { log: () => capture.log },
);
let url: string;
let direct: App;
let directUrl: string;
let workerToken: string;

beforeAll(async () => {
  ({ url } = await t.app.start());
  direct = await buildApp(
    secondAppConfig(t, { scheduler: { automatic: false }, limits: { authFailuresPerMinute: 3 } }),
    {
      log: createLogger('silent'),
    },
  );
  ({ url: directUrl } = await direct.start());
  workerToken = await registerWorker(t, 'behind-the-proxy');
});
afterAll(async () => {
  await direct?.stop();
});

const plain = `{ workerPools { name } }`;
const guess = (i: number) => `tsk_user_guess-${i}-0000000000000000000000`;

/** A request to `target` from 127.0.0.1 (or `from`), with a token and X-Forwarded-For (a list: one header each) when given. */
function request(
  target: string,
  opts: { method?: 'GET' | 'POST'; token?: string; xff?: string | string[]; from?: string; body?: string } = {},
) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const u = new URL(target);
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: opts.method ?? 'POST',
        localAddress: opts.from,
        headers: {
          ...(opts.body !== undefined
            ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(opts.body) }
            : {}),
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
          ...(opts.xff ? { 'x-forwarded-for': opts.xff } : {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}
/** The HTTP status of `{ workerPools { name } }` sent with these options. */
const graphqlStatus = async (opts: Parameters<typeof request>[1], target = url) =>
  (await request(target, { ...opts, body: JSON.stringify({ query: plain }) })).status;

/**
 * A graphql-ws client whose upgrade request carries these headers (as from HAProxy with `option
 * forwardfor`), from 127.0.0.1 or `from`: how it closed, and `run` for a query over it.
 */
function wsClient(target: string, token: string | null, headers: Record<string, string>, from?: string) {
  let resolveClosed: (v: number) => void;
  const closed = new Promise<number>((r) => (resolveClosed = r));
  class WithHeaders extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { headers, ...(from ? { localAddress: from } : {}) });
    }
  }
  const client = createClient({
    url: target.replace(/^http/, 'ws'),
    webSocketImpl: WithHeaders,
    lazy: false,
    retryAttempts: 0,
    connectionParams: token ? { authorization: `Bearer ${token}` } : {},
    on: { closed: (e) => resolveClosed((e as { code: number }).code) },
    onNonLazyError: () => undefined,
  });
  const run = () =>
    new Promise<unknown>((resolve, reject) => {
      let data: unknown;
      client.subscribe({ query: plain }, { next: (v) => (data = v), error: reject, complete: () => resolve(data) });
    });
  return { client, closed, run };
}

/** The log lines with this message, and the addresses they name. */
const addressesLogged = (msg: string) =>
  capture
    .lines()
    .filter((l) => l.msg === msg)
    .map((l) => l.address);

describe('behind a trusted proxy, the client is the address X-Forwarded-For names', () => {
  it('HTTP: one client’s bad tokens throttle its address, not the proxy, and a worker behind the same proxy still authenticates', async () => {
    for (let i = 0; i < 3; i++) expect(await graphqlStatus({ token: guess(i), xff: '10.0.0.1' })).toBe(401);
    expect(await graphqlStatus({ token: ADMIN_TOKEN, xff: '10.0.0.1' })).toBe(429);
    // A client cannot leave its address behind by naming another one left of it: the proxy appends its own.
    expect(await graphqlStatus({ token: ADMIN_TOKEN, xff: '10.0.0.2, 10.0.0.1' })).toBe(429);
    // Nor with a header of its own before the proxy's (HAProxy's `option forwardfor` adds one): read as one list.
    expect(await graphqlStatus({ token: ADMIN_TOKEN, xff: ['10.0.0.2', '10.0.0.1'] })).toBe(429);
    expect(await graphqlStatus({ token: ADMIN_TOKEN, xff: ['10.0.0.1', '10.0.0.2'] })).toBe(200);
    expect(await graphqlStatus({ token: workerToken, xff: '10.0.0.2' })).toBe(200);
    // The proxy's own calls (without the header) are not throttled either.
    expect(await graphqlStatus({ token: ADMIN_TOKEN })).toBe(200);
    // The log lines name the client, never the proxy.
    expect(addressesLogged('authentication failed')).toEqual(['10.0.0.1', '10.0.0.1', '10.0.0.1']);
    expect(addressesLogged('authentication throttled')).toEqual(['10.0.0.1', '10.0.0.1', '10.0.0.1']);
  });

  it('a malformed header is ignored: the proxy’s address counts', async () => {
    const mark = capture.mark();
    expect(await graphqlStatus({ token: guess(9), xff: '10.0.9.1:4000' })).toBe(401);
    const line = capture
      .lines()
      .slice(mark)
      .find((l) => l.msg === 'authentication failed');
    expect(line?.address).toBe('127.0.0.1');
  });

  it('WebSocket: the upgrade request’s X-Forwarded-For, one throttle with HTTP', async () => {
    const mark = capture.mark();
    for (let i = 0; i < 3; i++) {
      const { closed } = wsClient(url, guess(10 + i), { 'x-forwarded-for': '10.0.1.1' });
      expect(await closed).toBe(4401);
    }
    const throttled = wsClient(url, ADMIN_TOKEN, { 'x-forwarded-for': '10.0.1.1' });
    expect(await throttled.closed).toBe(4429);
    expect(await graphqlStatus({ token: ADMIN_TOKEN, xff: '10.0.1.1' })).toBe(429);
    const worker = wsClient(url, workerToken, { 'x-forwarded-for': '10.0.1.2' });
    try {
      expect(await worker.run()).toEqual({ data: { workerPools: [] } });
    } finally {
      await worker.client.dispose();
    }
    const failed = capture
      .lines()
      .slice(mark)
      .filter((l) => l.msg === 'authentication failed');
    expect(failed.map((l) => l.address)).toEqual(['10.0.1.1', '10.0.1.1', '10.0.1.1']);
  });

  it('the status pages: a bad token throttles the forwarded address', async () => {
    const page = (token: string, xff: string) =>
      request(new URL('/-/status/', url).href, { method: 'GET', token, xff });
    for (let i = 0; i < 3; i++) expect((await page(guess(20 + i), '10.0.2.1')).status).toBe(401);
    expect((await page(ADMIN_TOKEN, '10.0.2.1')).status).toBe(429);
    expect((await page(ADMIN_TOKEN, '10.0.2.2')).status).toBe(200);
  });

  it('callers without a token are counted per forwarded address', async () => {
    for (let i = 0; i < 5; i++) expect(await graphqlStatus({ xff: '10.0.3.1' })).toBe(200);
    expect(await graphqlStatus({ xff: '10.0.3.1' })).toBe(429);
    expect(await graphqlStatus({ xff: '10.0.3.2' })).toBe(200);
    expect(addressesLogged('anonymous request refused: over the limit')).toEqual(['10.0.3.1']);
  });
});

describe('without TAGSCHED_TRUSTED_PROXIES, X-Forwarded-For is ignored', () => {
  it('a client cannot pick its address: the throttle counts the peer, over HTTP and WebSocket', async () => {
    const from = '127.0.0.9';
    for (let i = 0; i < 3; i++)
      expect(await graphqlStatus({ from, token: guess(30 + i), xff: `10.0.4.${i}` }, directUrl)).toBe(401);
    expect(await graphqlStatus({ from, token: ADMIN_TOKEN, xff: '10.0.4.9' }, directUrl)).toBe(429);
    const socket = wsClient(directUrl, ADMIN_TOKEN, { 'x-forwarded-for': '10.0.4.9' }, from);
    expect(await socket.closed).toBe(4429);
    // Another peer is not throttled.
    expect(await graphqlStatus({ from: '127.0.0.10', token: ADMIN_TOKEN, xff: '10.0.4.9' }, directUrl)).toBe(200);
  });
});
