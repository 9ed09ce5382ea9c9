/**
 * The status pages over real HTTP on the real app (issue 11, point 3): what each viewer sees of a
 * private workspace, sign-in with a cookie, and hostile addresses, queries and forms, each a 4xx
 * page and never a 500.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  addMember,
  AMD64_METADATA,
  connectedWorker,
  createPool,
  createUser,
  createWorkspace,
  expectResult,
  memberOf,
  ok,
  registerWorker,
  sbuild,
  submitOk,
} from '../helpers/fixtures.js';

const t = useTestApp();

const VIEWERS = ['anonymous', 'outsider', 'member', 'admin'] as const;
type Who = (typeof VIEWERS)[number];
const token: Record<Who, string | null> = { anonymous: null, outsider: null, member: null, admin: null };
const INSIDERS: readonly Who[] = ['member', 'admin'];
const SECRET_TAG = 'site:embargo-cve-2026-0001';
const wr: Record<'public' | 'private' | 'running' | 'privateRunning', string> = {
  public: '',
  private: '',
  running: '',
  privateRunning: '',
};
let base = '';

beforeAll(async () => {
  const { url } = await t.app.start();
  base = url.replace(/\/graphql$/, '');
  token.admin = t.adminToken;
  await createWorkspace(t, 'pages/public');
  await createWorkspace(t, 'pages/private', { isPublic: false });
  token.member = await memberOf(t, 'pages/private', 'alice');
  await addMember(t, 'pages/public', 'alice');
  token.outsider = await createUser(t, 'carol');
  const busy = await connectedWorker(t, 'busy-worker', {}, { ...AMD64_METADATA, tools: ['sbuild', 'secret-tool'] });
  await registerWorker(t, 'quiet-worker');
  await createPool(t, { name: 'cloud', providedTags: ['site:pool-only'] });
  wr.public = (
    await submitOk(t, sbuild('pages/public', 'pub-pkg', { requiredTags: ['site:nowhere'] }), token.member)
  ).id;
  wr.private = (
    await submitOk(t, { ...sbuild('pages/private', 'embargoed-pkg'), requiredTags: [SECRET_TAG] }, token.member)
  ).id;
  wr.running = (
    await submitOk(t, sbuild('pages/public', 'running-pkg', { requiredTags: ['site:nowhere'] }), token.member)
  ).id;
  wr.privateRunning = (
    await submitOk(t, sbuild('pages/private', 'hidden-run-pkg', { requiredTags: ['site:nowhere'] }), token.member)
  ).id;
  for (const id of [wr.running, wr.privateRunning]) {
    await t.sql(
      `update work_request set status = 'RUNNING', assigned_at = now(), started_at = now(), worker_id = (select id from worker where name = 'busy-worker') where id = ?`,
      [Number(id)],
    );
  }
  const ack = await ok(
    t,
    'mutation($i: AppendWorkRequestLogInput!) { appendWorkRequestLog(input: $i) { __typename } }',
    { i: { id: wr.running, offset: 0, bytes: 30, text: 'building <b>pkg</b> & "done"\n' } },
    busy,
  );
  expect(ack.appendWorkRequestLog.__typename).not.toMatch(/Error/);
});

async function get(path: string, who: Who | { cookie: string } = 'anonymous', init: RequestInit = {}) {
  const headers: Record<string, string> = { ...(init.headers as Record<string, string>) };
  if (typeof who === 'object') headers.cookie = who.cookie;
  else if (token[who]) headers.authorization = `Bearer ${token[who]}`;
  const res = await fetch(base + path, { redirect: 'manual', ...init, headers });
  return { status: res.status, html: await res.text(), headers: res.headers };
}

describe('every page, for every viewer', () => {
  const pages = () => [
    '/',
    '/-/status/',
    '/-/status/workers/',
    '/-/status/workers/busy-worker/',
    '/-/status/pools/',
    '/-/status/pools/cloud/',
    '/-/status/queue/',
    `/-/status/work-requests/${wr.public}/`,
    '/-/status/login',
  ];

  it.each(VIEWERS)('%s: each page is HTML with the stylesheet and the navigation to all the others', async (who) => {
    for (const path of pages()) {
      const { status, html, headers } = await get(path, who);
      expect(status, path).toBe(200);
      expect(headers.get('content-type')).toMatch(/^text\/html/);
      expect(headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(html).toContain('<link rel="stylesheet" href="/-/status/style.css">');
      for (const link of [
        'href="/"',
        'href="/-/status/workers/"',
        'href="/-/status/pools/"',
        'href="/-/status/queue/"',
      ])
        expect(html, path).toContain(link);
      expect(html).not.toContain('<script');
    }
  });

  it('the stylesheet is served as CSS', async () => {
    const res = await fetch(`${base}/-/status/style.css`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/css/);
    expect(await res.text()).toContain('@media');
  });

  it('/ is the overview, not the GraphQL welcome page, and links to GraphiQL', async () => {
    const { html } = await get('/');
    expect(html).toContain('<h1>tagsched</h1>');
    expect(html).toContain('href="/graphql"');
  });
});

describe('what each viewer sees of a private workspace', () => {
  it.each(VIEWERS)(
    '%s: a private request’s page only to its workspace’s members and admins (others: not found)',
    async (who) => {
      const { status, html } = await get(`/-/status/work-requests/${wr.private}/`, who);
      expect(status).toBe(INSIDERS.includes(who) ? 200 : 404);
      expect(html.includes(SECRET_TAG)).toBe(INSIDERS.includes(who));
    },
  );

  it.each(VIEWERS)('%s: the queue counts private work for everybody and describes it only to insiders', async (who) => {
    const { html } = await get('/-/status/queue/', who);
    expect(html).toContain('4 requests pending'.replace('4', '2')); // public and private pending
    expect(html.includes(SECRET_TAG)).toBe(INSIDERS.includes(who));
    expect(html.includes(`/-/status/work-requests/${wr.private}/`)).toBe(INSIDERS.includes(who));
    expect(html.includes(`/-/status/work-requests/${wr.public}/`)).toBe(true);
    if (!INSIDERS.includes(who)) expect(html).toContain('1 of them is in workspaces you cannot see');
  });

  it.each(VIEWERS)(
    '%s: a worker’s running work: private requests linked for insiders, counted for the others',
    async (who) => {
      const { html } = await get('/-/status/workers/busy-worker/', who);
      expect(html).toContain(`/-/status/work-requests/${wr.running}/`);
      expect(html.includes(`/-/status/work-requests/${wr.privateRunning}/`)).toBe(INSIDERS.includes(who));
      expect(html.includes('and 1 more in workspaces you cannot see')).toBe(!INSIDERS.includes(who));
    },
  );

  it.each(VIEWERS)('%s: a worker’s tags and metadata only to signed-in users', async (who) => {
    const { html } = await get('/-/status/workers/busy-worker/', who);
    expect(html.includes('worker:cap:secret-tool')).toBe(who !== 'anonymous');
    expect(html.includes('<h2>Metadata</h2>')).toBe(who !== 'anonymous');
    const list = await get('/-/status/workers/', who);
    expect(list.html).toContain('busy-worker');
    expect(list.html).not.toContain('secret-tool');
  });

  it.each(VIEWERS)('%s: filtering workers by tag finds them only for those who may see tags', async (who) => {
    const { status, html } = await get('/-/status/workers/?tag=worker%3Acap%3Asecret-tool', who);
    expect(status).toBe(200);
    expect(html.includes('href="/-/status/workers/busy-worker/"')).toBe(who !== 'anonymous');
    expect(html.includes('to filter by tag')).toBe(who === 'anonymous');
  });

  it('the log is on the request’s page, escaped, and the page refreshes itself while it runs', async () => {
    const { html } = await get(`/-/status/work-requests/${wr.running}/`);
    expect(html).toContain('building &lt;b&gt;pkg&lt;/b&gt; &amp; &quot;done&quot;');
    expect(html).toContain('<meta http-equiv="refresh" content="3">');
    expect((await get(`/-/status/work-requests/${wr.public}/`)).html).not.toContain('http-equiv="refresh"');
  });

  it('a pool whose launches keep failing shows as degraded with its last error, on both pool pages', async () => {
    await t.sql(
      `update worker_pool set launch_failures = 5, last_error = 'quota: <too many> servers', last_error_kind = 'quota', last_error_at = now() where name = 'cloud'`,
    );
    try {
      for (const path of ['/-/status/pools/', '/-/status/pools/cloud/']) {
        const { html } = await get(path);
        expect(html, path).toContain('>degraded<');
        expect(html, path).toContain('quota: &lt;too many&gt; servers');
      }
    } finally {
      await t.sql(
        `update worker_pool set launch_failures = 0, last_error = null, last_error_kind = null, last_error_at = null where name = 'cloud'`,
      );
    }
  });

  it('filters: status, pool and paging keep each other', async () => {
    const { html } = await get('/-/status/workers/?status=DISCONNECTED');
    expect(html).toContain('quiet-worker');
    expect(html).not.toContain('href="/-/status/workers/busy-worker/"');
    expect((await get('/-/status/workers/?pool=cloud')).html).toContain('No worker matches these filters.');
    expect((await get('/-/status/workers/?pool=-')).html).toContain('quiet-worker');
  });
});

describe('signing in', () => {
  const form = (body: string, headers: Record<string, string> = {}) =>
    get('/-/status/login', 'anonymous', {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    });

  it('a good token: a 303 back to where the visitor was, with an HttpOnly SameSite=Strict cookie that signs the pages in', async () => {
    const res = await form(`token=${encodeURIComponent(token.member!)}&next=${encodeURIComponent('/-/status/queue/')}`);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/-/status/queue/');
    const cookie = res.headers.get('set-cookie')!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).not.toMatch(/Secure/); // plain HTTP here; behind an HTTPS proxy it is Secure
    const jar = { cookie: cookie.split(';')[0] };
    const queue = await get('/-/status/queue/', jar);
    expect(queue.html).toContain('Signed in as <strong>alice</strong>');
    expect(queue.html).toContain(SECRET_TAG);
  });

  it('behind a proxy that says HTTPS, the cookie is Secure', async () => {
    const res = await form(`token=${encodeURIComponent(token.member!)}`, { 'x-forwarded-proto': 'https' });
    expect(res.headers.get('set-cookie')).toMatch(/; Secure/);
  });

  it('a wrong token: the form again with a 401 and the reason; nothing is set', async () => {
    const res = await form('token=tsk_user_nope');
    expect(res.status).toBe(401);
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.html).toContain('That token is refused');
  });

  it('another site’s form is refused', async () => {
    const res = await form(`token=${encodeURIComponent(token.member!)}`, { origin: 'https://evil.example' });
    expect(res.status).toBe(403);
    expect(res.headers.get('set-cookie')).toBeNull();
  });

  it('a revoked token in the cookie: anonymous, and the cookie is cleared', async () => {
    const mine = await createUser(t, 'dave');
    const res = await form(`token=${encodeURIComponent(mine)}`);
    const jar = { cookie: res.headers.get('set-cookie')!.split(';')[0] };
    expect((await get('/', jar)).html).toContain('Signed in as <strong>dave</strong>');
    await expectResult(t, 'Token', 'mutation { revokeToken(input: {}) { __typename } }', {}, mine);
    const after = await get('/-/status/workers/busy-worker/', jar);
    expect(after.status).toBe(200);
    expect(after.html).not.toContain('Signed in as');
    expect(after.html).not.toContain('worker:cap:secret-tool');
    expect(after.headers.get('set-cookie')).toMatch(/^tagsched_session=;.*Max-Age=0/);
  });

  it('signing out clears the cookie', async () => {
    const res = await get('/-/status/logout', 'anonymous', { method: 'POST' });
    expect(res.status).toBe(303);
    expect(res.headers.get('set-cookie')).toMatch(/Max-Age=0/);
  });

  it('a wrong bearer token is refused with 401, as on /graphql', async () => {
    const res = await fetch(`${base}/-/status/workers/`, { headers: { authorization: 'Bearer tsk_user_not-a-token' } });
    expect(res.status).toBe(401);
    await res.text();
  });
});

describe('hostile input: a 4xx page, never a 500', () => {
  const cases: [string, () => string, number][] = [
    ['page 0', () => '/-/status/workers/?page=0', 400],
    ['a huge page number', () => '/-/status/workers/?page=99999999999999999999999', 400],
    ['a page past the end', () => '/-/status/workers/?page=7', 404],
    ['an unknown status', () => '/-/status/workers/?status=ASLEEP', 400],
    ['a NUL in a pool', () => '/-/status/workers/?pool=a%00b', 400],
    ['an unknown pool', () => '/-/status/workers/?pool=nowhere', 404],
    ['a bad tag', () => '/-/status/workers/?tag=%3Cscript%3Ealert(1)%3C%2Fscript%3E', 400],
    ['broken percent-encoding in the query', () => '/-/status/workers/?tag=%E0%A4%A', 400],
    ['a lone percent sign in the query', () => '/-/status/queue/?page=%', 400],
    ['broken percent-encoding in a name', () => '/-/status/workers/%E0%A4%A/', 400],
    ['an unknown worker', () => '/-/status/workers/nobody/', 404],
    ['a slash in a name', () => '/-/status/workers/a%2Fb/', 404],
    ['a NUL pool name', () => '/-/status/pools/%00/', 404],
    ['an unknown pool page', () => '/-/status/pools/nowhere/', 404],
    ['a bad instance page', () => '/-/status/pools/cloud/?page=abc', 400],
    ['a negative queue page', () => '/-/status/queue/?page=-1', 400],
    ['a queue page past the end', () => '/-/status/queue/?page=50', 404],
    ['a work request id that is not a number', () => '/-/status/work-requests/abc/', 404],
    ['a huge work request id', () => '/-/status/work-requests/99999999999999999999/', 404],
    ['work request 0', () => '/-/status/work-requests/0/', 404],
    ['a work request that does not exist', () => '/-/status/work-requests/2147483647/', 404],
    ['a negative log offset', () => `/-/status/work-requests/${wr.public}/?offset=-5`, 400],
    ['a log offset in exponent form', () => `/-/status/work-requests/${wr.public}/?offset=1e9`, 400],
    ['an unknown page', () => '/-/status/nothing-here/', 404],
    ['a deep unknown page', () => '/-/status/workers/a/b/c/', 404],
    ['a bad next on the sign-in page', () => '/-/status/login?next=%ZZ', 400],
  ];

  it.each(cases)('%s', async (_label, path, expected) => {
    for (const who of ['anonymous', 'outsider'] as const) {
      const res = await get(path(), who);
      expect(res.status, `${who} ${path()}`).toBe(expected);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.html).not.toMatch(/<script/i);
    }
  });

  it('a log offset past the end shows the end, not an error', async () => {
    expect((await get(`/-/status/work-requests/${wr.running}/?offset=999999999999999`)).status).toBe(200);
  });

  it('a revoked or unknown cookie on every page: the anonymous page (or its 4xx), never a 500', async () => {
    for (const path of [
      '/',
      '/-/status/workers/',
      '/-/status/pools/',
      '/-/status/queue/',
      `/-/status/work-requests/${wr.private}/`,
      '/-/status/workers/%E0%A4%A/',
    ]) {
      for (const cookie of [
        'tagsched_session=tsk_user_revoked',
        'tagsched_session=%E0%A4%A',
        `tagsched_session=${'x'.repeat(5000)}`,
        'tagsched_session=a%00b',
      ]) {
        const res = await get(path, { cookie });
        expect(res.status, `${path} ${cookie.slice(0, 40)}`).toBeLessThan(500);
        expect(res.html).not.toContain('Signed in as');
      }
    }
  });

  it('forms: wrong method, wrong content type, a body too large', async () => {
    expect((await get('/-/status/workers/', 'anonymous', { method: 'POST' })).status).toBe(405);
    expect((await get('/-/status/logout')).status).toBe(405);
    expect(
      (
        await get('/-/status/login', 'anonymous', {
          method: 'POST',
          body: '{"token":"x"}',
          headers: { 'content-type': 'application/json' },
        })
      ).status,
    ).toBe(400);
    const big = await get('/-/status/login', 'anonymous', {
      method: 'POST',
      body: `token=${'a'.repeat(20_000)}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(big.status).toBe(413);
    expect(
      (
        await get('/-/status/login', 'anonymous', {
          method: 'POST',
          body: 'token=%E0%A4%A',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        })
      ).status,
    ).toBe(400);
  });

  it('the sign-in page never sends a visitor to another site', async () => {
    const res = await get('/-/status/login', 'anonymous', {
      method: 'POST',
      body: `token=${encodeURIComponent(token.member!)}&next=${encodeURIComponent('//evil.example/')}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/');
  });
});

describe('one task class of the queue', () => {
  it('lists the oldest few per class, and all of a class, paged, behind its link', async () => {
    for (let i = 0; i < 6; i++)
      await submitOk(t, sbuild('pages/public', `more-${i}`, { requiredTags: ['site:nowhere'] }), token.member);
    const list = await get('/-/status/queue/');
    const link = /href="(\/-\/status\/queue\/\?class=(\d+))"/.exec(list.html)!;
    expect(list.html).toContain('All 7 in this class');
    expect(list.html.match(/\/-\/status\/work-requests\/\d+\//g)!.length).toBe(5);
    const one = await get(link[1].replace(/&amp;/g, '&'));
    expect(one.status).toBe(200);
    expect(one.html.match(/\/-\/status\/work-requests\/\d+\//g)!.length).toBe(7);
    expect((await get(`${link[1]}&page=2`)).status).toBe(404);
    // The private class is not found by those who may not see its work.
    const member = await get('/-/status/queue/', 'member');
    const classes = [...member.html.matchAll(/\?class=(\d+)"/g)].map((m) => m[1]);
    const hidden = classes.find((c) => c !== link[2])!;
    expect((await get(`/-/status/queue/?class=${hidden}`, 'member')).status).toBe(200);
    expect((await get(`/-/status/queue/?class=${hidden}`, 'anonymous')).status).toBe(404);
    expect((await get('/-/status/queue/?class=abc')).status).toBe(400);
    expect((await get('/-/status/queue/?class=99999999')).status).toBe(404);
  });
});

describe('the start estimate on the pages', () => {
  it('a request nothing can run: no expected start, and why, on its page and as its class’s wait on the queue page', async () => {
    const page = (await get(`/-/status/work-requests/${wr.public}/`)).html;
    expect(page).toContain('<dt>Expected start</dt>');
    expect(page).toContain('none: nothing can ever run it');
    expect((await get('/-/status/queue/')).html).toContain(
      'Estimated wait: <span class="muted">none (nothing can ever run it',
    );
  });
});
