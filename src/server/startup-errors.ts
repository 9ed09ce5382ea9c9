import type { ServerConfig } from '../core/config/server.js';

/** A database URL as it may be shown: without its password (`name`: the setting it comes from). */
export function shownDatabaseUrl(url: string, name = 'DATABASE_URL'): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return `(an unreadable ${name})`;
  }
}

/** A failure to connect to TAGSCHED_DATABASE_SESSION_URL (when it is set): its line names that setting. */
export class SessionConnectionError extends Error {
  constructor(override readonly cause: unknown) {
    super(`cannot connect to TAGSCHED_DATABASE_SESSION_URL: ${(cause as Error)?.message ?? String(cause)}`);
    this.name = 'SessionConnectionError';
  }
}

interface SystemError {
  code?: string;
  syscall?: string;
  message?: string;
  errors?: unknown[];
}

/** The first error with a code: Node wraps a refused connection to every address of a host in an AggregateError. */
function codeOf(err: unknown): SystemError {
  const e = (err ?? {}) as SystemError;
  if (!e.code && Array.isArray(e.errors) && e.errors.length) return codeOf(e.errors[0]);
  return e;
}

const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
]);

/**
 * One line that says why the service could not start and what to change, for the causes an operator
 * can fix (a port in use, a database out of reach or refusing us, the embedded database locked); null
 * for anything else, which is a bug and is logged in full.
 */
export function describeStartupError(err: unknown, config: ServerConfig): string | null {
  if (err instanceof SessionConnectionError && config.databaseSessionUrl)
    return describeError(err.cause, config, config.databaseSessionUrl, 'TAGSCHED_DATABASE_SESSION_URL');
  return describeError(err, config, config.databaseUrl, 'DATABASE_URL');
}

/** describeStartupError for an error of the connections to `url`, the value of `setting` (null: the embedded database). */
function describeError(err: unknown, config: ServerConfig, url: string | null, setting: string): string | null {
  const e = codeOf(err);
  const db = url ? `the database at ${shownDatabaseUrl(url, setting)}` : 'the embedded database';
  if (e.syscall === 'listen' || e.code === 'EADDRINUSE') {
    if (e.code === 'EADDRINUSE')
      return `port ${config.port} on ${config.host} is already in use: stop what holds it, or set PORT`;
    if (e.code === 'EACCES')
      return `may not listen on port ${config.port} (ports below 1024 need privileges): set PORT`;
    if (e.code === 'EADDRNOTAVAIL') return `HOST ${config.host} is not an address of this machine: set HOST`;
  }
  if (e.code && UNREACHABLE.has(e.code))
    return `cannot reach ${db} (${e.code}): check ${setting} and that PostgreSQL is running`;
  // PostgreSQL's own refusals at connection time (SQLSTATE class 28: authorization; 3D000: no such database).
  if (e.code && /^28/.test(e.code))
    return `${db} refused the connection: ${e.message}; check the user and password in ${setting}`;
  if (e.code === '3D000') return `${db} does not exist: ${e.message}; check ${setting}`;
  if (e.message && /the embedded database .* is in use by process/.test(e.message))
    return `${e.message}: stop that process, or set TAGSCHED_DATA_DIR`;
  return null;
}
