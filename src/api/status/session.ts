/**
 * Who is looking at a status page, and signing in and out. A page is read with the bearer token of
 * its `Authorization` header (a wrong one is a 401, as on /graphql), or else with the token a visitor
 * signed in with, kept in an HttpOnly, SameSite=Strict cookie. Every token is checked as the API
 * checks it (client-auth.ts: the failure throttle, then services/identity/auth.ts: revoked, disabled, expired
 * …); a cookie whose token is refused makes the visitor anonymous and is cleared.
 */
import type { IncomingMessage } from 'node:http';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ClientRefusal, type ClientAuth } from '../client-auth.js';
import type { Viewer } from '../../services/identity/auth.js';
import { StatusError } from './request.js';

export const SESSION_COOKIE = 'tagsched_session';

/** The longest cookie value looked up: longer is not a token. */
const MAX_TOKEN_LENGTH = 512;

/** The value of one cookie of a request, or null. */
export function readCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/**
 * The Set-Cookie header that keeps a signed-in token, for as long as the token lives (else the browser
 * session); `Secure` when the page came over HTTPS (directly, or through a proxy that says so).
 */
export function sessionCookie(token: string, expiresAt: Date | null, secure: boolean, now = new Date()): string {
  const maxAge = expiresAt ? `; Max-Age=${Math.max(0, Math.floor((expiresAt.getTime() - now.getTime()) / 1000))}` : '';
  return `${SESSION_COOKIE}=${encodeURIComponent(token)}; Path=/; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}${maxAge}`;
}

/** Whether a request came over HTTPS. */
function overHttps(req: IncomingMessage): boolean {
  return (req.socket as { encrypted?: boolean }).encrypted === true || req.headers['x-forwarded-proto'] === 'https';
}

/** The Set-Cookie header that removes it. */
export const CLEARED_COOKIE = `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`;

/** The viewer of a page request from the client at `address`, and a Set-Cookie header to send when its cookie must go. */
export async function pageViewer(
  em: EntityManager,
  authenticate: ClientAuth,
  req: IncomingMessage,
  address: string,
): Promise<{ viewer: Viewer; setCookie: string | null }> {
  const header = req.headers.authorization;
  if (header) {
    try {
      return { viewer: (await authenticate(em, header, address)).viewer, setCookie: null };
    } catch (err) {
      if (err instanceof ClientRefusal) throw new StatusError(err.status, err.message);
      throw err;
    }
  }
  const cookie = readCookie(req.headers.cookie, SESSION_COOKIE);
  if (!cookie) return { viewer: { kind: 'anonymous' }, setCookie: null };
  let token: string;
  try {
    token = decodeURIComponent(cookie);
  } catch {
    return { viewer: { kind: 'anonymous' }, setCookie: CLEARED_COOKIE };
  }
  if (!token || token.length > MAX_TOKEN_LENGTH || token.includes('\0'))
    return { viewer: { kind: 'anonymous' }, setCookie: CLEARED_COOKIE };
  try {
    return { viewer: (await authenticate(em, token, address)).viewer, setCookie: null };
  } catch (err) {
    if (!(err instanceof ClientRefusal)) throw err;
    // Refused (revoked, expired, unknown): anonymous from now on. Throttled: anonymous for now.
    return { viewer: { kind: 'anonymous' }, setCookie: err.status === 401 ? CLEARED_COOKIE : null };
  }
}

/** Checks a token given to the sign-in form by the client at `address`, as the API would; throws a StatusError for a refused one. */
export async function signIn(
  em: EntityManager,
  authenticate: ClientAuth,
  req: IncomingMessage,
  address: string,
  token: string,
): Promise<{ viewer: Viewer; cookie: string }> {
  const value = token.trim();
  if (!value || value.length > MAX_TOKEN_LENGTH) throw new StatusError(401, 'That is not a valid token.');
  try {
    const { viewer, expiresAt } = await authenticate(em, value, address);
    if (viewer.kind === 'anonymous') throw new StatusError(401, 'That is not a valid token.');
    if (viewer.kind === 'activation')
      throw new StatusError(400, 'An activation token is for a new worker: it cannot sign in.');
    return { viewer, cookie: sessionCookie(value, expiresAt, overHttps(req)) };
  } catch (err) {
    if (err instanceof ClientRefusal)
      throw new StatusError(err.status, err.status === 401 ? `That token is refused: ${err.message}.` : err.message);
    throw err;
  }
}

/**
 * Where to go after signing in: a path of this service (never another site), else the overview. Only
 * printable ASCII but the backslash: the path goes into a Location header, which holds nothing else
 * (a page's own address comes percent-encoded).
 */
export function safeNext(next: string | undefined): string {
  if (
    !next ||
    !next.startsWith('/') ||
    next.startsWith('//') ||
    /[^\x21-\x5b\x5d-\x7e]/.test(next) ||
    next.length > 2000
  )
    return '/';
  return next;
}
