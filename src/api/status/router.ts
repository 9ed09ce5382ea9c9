/**
 * The status pages (docs/design.md: operating): server-rendered HTML under `/-/status/` (and the overview at `/`),
 * one stylesheet, no JavaScript. Each request: its viewer (session.ts), its route, its page; a page
 * that cannot be served is a 4xx page (request.ts: StatusError), never a 500.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ClientAuth } from '../client-auth.js';
import type { Config } from '../../core/config/config.js';
import { answerAndClose, bodyRefusal } from '../limits/http.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import { html } from './html.js';
import { layout, type PageContext } from './layout.js';
import { landingPage } from './pages/landing.js';
import { loginPage } from './pages/login.js';
import { poolPage, poolsPage } from './pages/pools.js';
import { queuePage } from './pages/queue.js';
import { workerPage } from './pages/worker.js';
import { workersPage } from './pages/workers.js';
import { workRequestPage } from './pages/work-request.js';
import { parseParams, pathSegment, StatusError } from './request.js';
import { CLEARED_COOKIE, pageViewer, safeNext, signIn } from './session.js';
import { STYLESHEET, STYLESHEET_PATH } from './stylesheet.js';

/** What the pages need of the service. */
export interface StatusDeps {
  readonly em: EntityManager;
  readonly config: Config;
  readonly scheduler: Scheduler;
  readonly authenticate: ClientAuth;
  /** The client's address (api/http/client-address.ts), which its token's lookup is throttled by. */
  readonly address: string;
}

/** The largest sign-in form body read, in bytes. */
const MAX_FORM_BYTES = 8 * 1024;

/** Whether the service serves this path as a status page. */
export function isStatusPath(pathname: string): boolean {
  return pathname === '/' || pathname === '/-/status' || pathname.startsWith('/-/status/');
}

const HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  // No script runs on these pages, and no other site may frame them.
  'content-security-policy':
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};

function send(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: string,
  extra: Record<string, string | string[]> = {},
): void {
  res.writeHead(status, { ...HEADERS, ...extra });
  res.end(req.method === 'HEAD' ? undefined : body);
}

const TITLES: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  411: 'Length required',
  413: 'Too large',
  429: 'Too many attempts',
};

function errorPage(ctx: PageContext, err: StatusError): string {
  return layout(
    ctx,
    { title: TITLES[err.status], section: null },
    html`<h1>${TITLES[err.status]}</h1><p class="error">${err.message}</p><p><a href="/">Overview</a></p>`,
  );
}

/**
 * The sign-in form's fields. Its length was checked before (bodyRefusal: at most MAX_FORM_BYTES, as
 * Content-Length says, which is what Node reads); a body longer all the same is read to its end
 * without being kept, and refused then.
 */
function readForm(req: IncomingMessage): Promise<Map<string, string>> {
  if (!/^application\/x-www-form-urlencoded\b/i.test(req.headers['content-type'] ?? ''))
    return Promise.reject(new StatusError(400, 'The form must be sent as application/x-www-form-urlencoded.'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_FORM_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > MAX_FORM_BYTES)
        return reject(new StatusError(413, `The form is too large: at most ${MAX_FORM_BYTES} bytes.`));
      try {
        resolve(parseParams(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
    req.on('error', reject);
  });
}

/** Sign-in and sign-out come from these pages only: another site's form is refused. */
function checkSameOrigin(req: IncomingMessage): void {
  const origin = req.headers.origin;
  let sameHost = true;
  if (origin !== undefined) {
    try {
      sameHost = new URL(origin).host === req.headers.host;
    } catch {
      sameHost = false; // "null" (a sandboxed or privacy-sensitive context) or something malformed
    }
  }
  if (!sameHost || req.headers['sec-fetch-site'] === 'cross-site')
    throw new StatusError(403, 'This form must be sent from the status pages themselves.');
}

type Route =
  | { page: 'landing' | 'login' | 'logout' | 'workers' | 'pools' | 'queue' }
  | { page: 'worker' | 'pool' | 'work-request'; name: string };

function route(pathname: string): Route | null {
  if (pathname === '/' || pathname === '/-/status' || pathname === '/-/status/') return { page: 'landing' };
  const m = /^\/-\/status\/([a-z-]+)(?:\/([^/]*))?\/?$/.exec(pathname);
  if (!m) return null;
  const [, section, segment] = m;
  const one = segment !== undefined && segment !== '';
  if (
    !one &&
    (section === 'login' || section === 'logout' || section === 'workers' || section === 'pools' || section === 'queue')
  )
    return { page: section };
  if (one && (section === 'workers' || section === 'pools'))
    return { page: section === 'workers' ? 'worker' : 'pool', name: pathSegment(segment) };
  if (one && section === 'work-requests') return { page: 'work-request', name: pathSegment(segment) };
  return null;
}

/** Serves one status page request (anything under /-/status/, and /). */
export async function handleStatusPage(deps: StatusDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const pathname = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q + 1);
  if (pathname === STYLESHEET_PATH) {
    res.writeHead(200, {
      'content-type': 'text/css; charset=utf-8',
      'cache-control': 'public, max-age=300',
      'x-content-type-options': 'nosniff',
    });
    res.end(req.method === 'HEAD' ? undefined : STYLESHEET);
    return;
  }
  let ctx: PageContext = { viewer: { kind: 'anonymous' }, here: '/', graphiql: deps.config.api.graphiql };
  const extra: Record<string, string> = {};
  try {
    const { viewer, setCookie } = await pageViewer(deps.em, deps.authenticate, req, deps.address);
    if (setCookie) extra['set-cookie'] = setCookie;
    ctx = {
      viewer,
      here: pathname.length + query.length < 1500 ? url : pathname.slice(0, 1500),
      graphiql: deps.config.api.graphiql,
    };
    const params = parseParams(query);
    const r = route(pathname);
    if (!r) throw new StatusError(404, 'There is no such page.');
    const post = req.method === 'POST';
    if (r.page === 'login' || r.page === 'logout') {
      if (post) {
        checkSameOrigin(req);
        if (r.page === 'logout') return send(req, res, 303, '', { location: '/', 'set-cookie': CLEARED_COOKIE });
        // A form over the limit (or of unknown length) is answered before it is read, with a page, and
        // the connection closed once the client has sent it (api/limits/http.ts), not reset.
        const refusal = bodyRefusal(req, MAX_FORM_BYTES);
        if (refusal) {
          const page = errorPage(
            ctx,
            new StatusError(refusal.status, `The sign-in form cannot be read: ${refusal.message}.`),
          );
          return answerAndClose(req, res, refusal.status, { ...HEADERS, ...extra }, page);
        }
        const form = await readForm(req);
        const next = safeNext(form.get('next'));
        try {
          const signed = await signIn(deps.em, deps.authenticate, req, deps.address, form.get('token') ?? '');
          return send(req, res, 303, '', { location: next, 'set-cookie': signed.cookie });
        } catch (err) {
          if (!(err instanceof StatusError) || err.status === 429) throw err;
          return send(req, res, err.status, loginPage(ctx, next, err.message), extra);
        }
      }
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new StatusError(405, 'These pages are read with GET.');
    if (r.page === 'logout') throw new StatusError(405, 'Sign out with the button at the top of every page.');
    const { em, config, scheduler } = deps;
    let body: string;
    switch (r.page) {
      case 'landing':
        body = await landingPage(em, config, ctx);
        break;
      case 'login':
        body = loginPage(ctx, safeNext(params.get('next')), null);
        break;
      case 'workers':
        body = await workersPage(em, config, ctx, params);
        break;
      case 'worker':
        body = await workerPage(em, config, ctx, r.name);
        break;
      case 'pools':
        body = await poolsPage(em, config, scheduler, ctx);
        break;
      case 'pool':
        body = await poolPage(em, config, scheduler, ctx, r.name, params);
        break;
      case 'queue':
        body = await queuePage(em, config, scheduler, ctx, params);
        break;
      case 'work-request':
        body = await workRequestPage(em, config, scheduler, ctx, r.name, params);
        break;
    }
    send(req, res, 200, body, extra);
  } catch (err) {
    if (!(err instanceof StatusError)) throw err;
    send(req, res, err.status, errorPage(ctx, err), err.status === 405 ? { ...extra, allow: 'GET, HEAD' } : extra);
  }
}
