/**
 * The status pages over real HTTP on the real app (issue 31, finding 9): control characters that
 * clients wrote (ESC, DEL, U+009B and the rest) are shown escaped on every page, never as they are; a
 * sign-in form over the limit gets a 413 page and a clean close, not a reset; a sign-in's `next` that
 * no Location header can hold sends the visitor to the overview.
 */
import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  connectedWorker,
  createWorkspace,
  ERROR_FIELDS,
  expectResult,
  ok,
  sbuild,
  submitOk,
} from '../helpers/fixtures.js';

const t = useTestApp({ scheduler: { releaseBackoffMs: 0 } });
let base = '';

/** Control characters a page must never carry as they are: C0 but tab and newline, DEL, C1. */
const RAW_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
/** What clients write: a colour (ESC [ 31 m), a lone ESC, DEL, a one-character CSI (U+009B), BEL and a carriage return. */
const HOSTILE = 'red\u001b[31mtext\u001b\u0007 del\u007f csi\u009b2J bell\u0007 cr\r!';
let requestId = '';

beforeAll(async () => {
  const { url } = await t.app.start();
  base = url.replace(/\/graphql$/, '');
  await createWorkspace(t, 'ctl/public');

  // A pool whose specifications hold C1 characters (the only ones they take), and whose instance a
  // site's script (the provisioner is off) records with a provider id and an error holding them.
  await expectResult(
    t,
    'WorkerPool',
    `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ${ERROR_FIELDS} } }`,
    {
      i: {
        name: 'ctl-pool',
        providerType: 'local',
        specifications: { instanceType: 'type\u009b2J', location: 'loc\u0085' },
      },
    },
  );
  const created = await ok(
    t,
    'mutation { createInstance(input: { pool: "ctl-pool", name: "ctl-instance" }) { __typename } }',
  );
  expect(created.createInstance.__typename).toBe('InstanceLaunchPayload');
  const launched = await ok(
    t,
    `mutation($p: String!) { recordInstanceLaunched(input: { name: "ctl-instance", providerId: $p }) { __typename ${ERROR_FIELDS} } }`,
    {
      p: 'id-\u009b-\u0085',
    },
  );
  expect(launched.recordInstanceLaunched.__typename).toBe('Instance');
  const stopped = await ok(
    t,
    `mutation($e: String) { recordInstanceStopped(input: { name: "ctl-instance", error: $e }) { __typename ${ERROR_FIELDS} } }`,
    {
      e: `boom ${HOSTILE}`,
    },
  );
  expect(stopped.recordInstanceStopped.__typename).toBe('Instance');

  // A request whose worker writes them into its log and its failure's reason.
  const worker = await connectedWorker(t, 'ctl-worker');
  requestId = (await submitOk(t, sbuild('ctl/public', 'ctl-pkg'))).id;
  await t.app.scheduler.runPass();
  const started = await ok(
    t,
    'mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }',
    { id: requestId },
    worker,
  );
  expect(started.startWorkRequest.__typename).toBe('WorkRequest');
  const text = `log ${HOSTILE}\n\u001b]0;title\u0007after osc\n`;
  const appended = await ok(
    t,
    `mutation($i: AppendWorkRequestLogInput!) { appendWorkRequestLog(input: $i) { __typename ${ERROR_FIELDS} } }`,
    { i: { id: requestId, offset: 0, bytes: Buffer.byteLength(text), text } },
    worker,
  );
  expect(appended.appendWorkRequestLog.__typename).toBe('WorkRequestLogAck');
  const completed = await ok(
    t,
    `mutation($id: ID!, $s: String) { completeWorkRequest(input: { id: $id, result: FAILURE, exitCode: 1, statusReason: $s }) { __typename ${ERROR_FIELDS} } }`,
    { id: requestId, s: `reason ${HOSTILE}` },
    worker,
  );
  expect(completed.completeWorkRequest.__typename).toBe('WorkRequest');
});

async function page(path: string, token: string | null = t.adminToken): Promise<string> {
  const res = await fetch(base + path, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  expect(res.status, path).toBe(200);
  return res.text();
}

describe('control characters clients wrote', () => {
  it('the pool pages, the request page (its log too), the queue and the overview show them escaped, never raw', async () => {
    const pages = {
      pools: await page('/-/status/pools/'),
      pool: await page('/-/status/pools/ctl-pool/'),
      poolAnonymous: await page('/-/status/pools/ctl-pool/', null),
      request: await page(`/-/status/work-requests/${requestId}/`),
      requestAnonymous: await page(`/-/status/work-requests/${requestId}/`, null),
      worker: await page('/-/status/workers/ctl-worker/'),
      queue: await page('/-/status/queue/'),
      overview: await page('/'),
    };
    for (const [name, html] of Object.entries(pages))
      expect(RAW_CONTROLS.exec(html)?.[0].charCodeAt(0).toString(16), name).toBeUndefined();

    // What they hold, visibly: the instance's error and provider id, the pool's specifications (DEL and C1 are not escaped by JSON).
    expect(pages.pool).toContain(
      'boom red\\u001b[31mtext\\u001b\\u0007 del\\u007f csi\\u009b2J bell\\u0007 cr\\u000d!',
    );
    expect(pages.pool).toContain('id-\\u009b-\\u0085');
    expect(pages.pool).toContain('&quot;instanceType&quot;:&quot;type\\u009b2J&quot;');
    expect(pages.pool).toContain('&quot;location&quot;:&quot;loc\\u0085&quot;');
    // The reason as it was given; the log as a console shows it: its escape sequences (the colour, the
    // one-character CSI, the title) removed, the lone ESC, BEL and DEL shown, the carriage return a line end.
    expect(pages.request).toContain('reason red\\u001b[31mtext');
    expect(pages.request).toMatch(
      /<pre class="log" id="log">log redtext\\u001b\\u0007 del\\u007f csi bell\\u0007 cr\n!\nafter osc\n<\/pre>/,
    );
  });
});

/** POSTs a body with node's http client, as a browser would send a form; resolves with what came back, or the error. */
function post(
  path: string,
  body: string,
): Promise<{ status?: number; text?: string; headers?: http.IncomingHttpHeaders; error?: string }> {
  return new Promise((resolve) => {
    const u = new URL(base + path);
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode, text, headers: res.headers }));
        res.on('error', (err) => resolve({ error: String(err) }));
      },
    );
    req.on('error', (err) => resolve({ error: String(err) }));
    req.end(body);
  });
}

describe('a sign-in form over the limit', () => {
  const big = `token=${'a'.repeat(100_000)}&next=%2F`;

  it('fetch gets a 413 page, not a reset', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/-/status/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: big,
      });
      expect(res.status).toBe(413);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('connection')).toBe('close');
      const html = await res.text();
      expect(html).toContain('<h1>Too large</h1>');
      expect(html).toContain(
        `The sign-in form cannot be read: the request body of ${Buffer.byteLength(big)} bytes is over the limit of 8192.`,
      );
    }
  });

  it('node’s http client too, and the server answers the next form as usual', async () => {
    const refused = await post('/-/status/login', big);
    expect(refused.error).toBeUndefined();
    expect(refused.status).toBe(413);
    expect(refused.headers?.connection).toBe('close');
    expect(refused.text).toContain('over the limit of 8192');
    const small = await post('/-/status/login', 'token=tsk_user_wrong');
    expect(small.status).toBe(401);
  });
});

describe('where a sign-in goes next', () => {
  it('a next that a Location header cannot hold (a control character, a character past ASCII) goes to the overview, not a 500', async () => {
    for (const next of ['/-/status/\u001b[31m', '/-/status/\u007f', '/-/status/\u009b', '/-/status/\u20ac']) {
      const res = await fetch(`${base}/-/status/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `token=${encodeURIComponent(t.adminToken)}&next=${encodeURIComponent(next)}`,
      });
      expect(res.status, JSON.stringify(next)).toBe(303);
      expect(res.headers.get('location')).toBe('/');
    }
  });
});
