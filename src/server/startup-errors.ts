import type { ServerConfig } from '../core/config/server.js';

/** The database URL as it may be shown: without its password. */
export function shownDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(an unreadable DATABASE_URL)';
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
  const e = codeOf(err);
  const db = config.databaseUrl ? `the database at ${shownDatabaseUrl(config.databaseUrl)}` : 'the embedded database';
  if (e.syscall === 'listen' || e.code === 'EADDRINUSE') {
    if (e.code === 'EADDRINUSE')
      return `port ${config.port} on ${config.host} is already in use: stop what holds it, or set PORT`;
    if (e.code === 'EACCES')
      return `may not listen on port ${config.port} (ports below 1024 need privileges): set PORT`;
    if (e.code === 'EADDRNOTAVAIL') return `HOST ${config.host} is not an address of this machine: set HOST`;
  }
  if (e.code && UNREACHABLE.has(e.code))
    return `cannot reach ${db} (${e.code}): check DATABASE_URL and that PostgreSQL is running`;
  // PostgreSQL's own refusals at connection time (SQLSTATE class 28: authorization; 3D000: no such database).
  if (e.code && /^28/.test(e.code))
    return `${db} refused the connection: ${e.message}; check the user and password in DATABASE_URL`;
  if (e.code === '3D000') return `${db} does not exist: ${e.message}; check DATABASE_URL`;
  if (e.message && /the embedded database .* is in use by process/.test(e.message))
    return `${e.message}: stop that process, or set TAGSCHED_DATA_DIR`;
  return null;
}
