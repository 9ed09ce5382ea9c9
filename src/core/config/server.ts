import os from 'node:os';
import path from 'node:path';
import { ConfigError, countVar, intVar, positiveIntVar } from './variables.js';

/** The shortest TAGSCHED_ADMIN_TOKEN accepted: a value people could guess is not a secret. */
export const ADMIN_TOKEN_MIN_LENGTH = 32;

/** The process: where it listens, its database and data directory, the secrets it starts with, its log. */
export interface ServerConfig {
  readonly port: number;
  readonly host: string;
  /** A PostgreSQL URL; null means the embedded PGlite database under `dataDir`. */
  readonly databaseUrl: string | null;
  /**
   * The URL of a session connection to the same database (TAGSCHED_DATABASE_SESSION_URL), for LISTEN and the
   * migration lock, when DATABASE_URL goes through a transaction pooler; null: DATABASE_URL itself.
   */
  readonly databaseSessionUrl: string | null;
  /** The most connections of the ORM's pool (TAGSCHED_DATABASE_POOL_SIZE); the embedded database always has 1. */
  readonly databasePoolSize: number;
  /**
   * PostgreSQL's idle_in_transaction_session_timeout on the pool's connections, in milliseconds
   * (TAGSCHED_DATABASE_IDLE_TRANSACTION_TIMEOUT_SECONDS; 0: none): a process paused or cut off inside a
   * transaction has its session ended by the server after this long, and its row locks with it. Sent only
   * when DATABASE_URL is PostgreSQL itself (no TAGSCHED_DATABASE_SESSION_URL): a transaction pooler refuses
   * it, and has a setting of its own (PgBouncer's idle_transaction_timeout).
   */
  readonly databaseIdleTransactionTimeoutMs: number;
  readonly dataDir: string;
  /** An admin token that must exist after start-up (deployments and scripts); null for none. */
  readonly adminToken: string | null;
  /** Key for encrypting pool provider accounts at rest; null derives one stored in the database directory. */
  readonly secretKey: string | null;
  readonly logLevel: string;
  /** This machine's name (TAGSCHED_HOST_NAME, else the OS host name): host-bound pools (local, qemu) run only on the host they name. */
  readonly hostName: string;
  /**
   * This process's name among the replicas of one database (TAGSCHED_PROCESS_NAME, else `<host name>:<port>`):
   * its row in the process registry and its server workers' names; the same across its restarts.
   */
  readonly processName: string;
  /** How often this process writes its heartbeat into the process registry (services/processes/registry.ts), in milliseconds. */
  readonly processHeartbeatMs: number;
  /**
   * A process whose registry heartbeat is older than this is taken as dead, in milliseconds: the leader marks its
   * workers disconnected and re-queues their unacknowledged work (takeOverDeadProcesses).
   */
  readonly processTimeoutMs: number;
}

/** Reads the server section from the environment. */
export function readServerConfig(env: NodeJS.ProcessEnv): ServerConfig {
  const port = countVar(env, 'PORT', 4000, 65535); // 0: any free port (the process name then takes the pid)
  const hostName = nameVar(env, 'TAGSCHED_HOST_NAME') ?? os.hostname();
  const processHeartbeatMs = positiveIntVar(env, 'TAGSCHED_PROCESS_HEARTBEAT_SECONDS', 3) * 1000;
  const processTimeoutMs = positiveIntVar(env, 'TAGSCHED_PROCESS_TIMEOUT_SECONDS', 15) * 1000;
  // One late heartbeat (a slow statement) must not make a live process look dead.
  if (processTimeoutMs < 2 * processHeartbeatMs)
    throw new ConfigError(
      `TAGSCHED_PROCESS_TIMEOUT_SECONDS (${processTimeoutMs / 1000}) must be at least twice TAGSCHED_PROCESS_HEARTBEAT_SECONDS (${processHeartbeatMs / 1000})`,
    );
  return {
    port,
    host: env.HOST || '0.0.0.0',
    databaseUrl: env.DATABASE_URL || null,
    databaseSessionUrl: sessionUrlVar(env),
    databasePoolSize: poolSizeVar(env),
    databaseIdleTransactionTimeoutMs:
      countVar(env, 'TAGSCHED_DATABASE_IDLE_TRANSACTION_TIMEOUT_SECONDS', 10, 3600) * 1000,
    dataDir: path.resolve(env.TAGSCHED_DATA_DIR || './data'),
    adminToken: adminTokenVar(env),
    secretKey: env.TAGSCHED_SECRET_KEY || null,
    logLevel: env.LOG_LEVEL || 'info',
    hostName,
    processName: nameVar(env, 'TAGSCHED_PROCESS_NAME') ?? `${hostName}:${port || process.pid}`,
    processHeartbeatMs,
    processTimeoutMs,
  };
}

/** TAGSCHED_ADMIN_TOKEN, refused when it is too short to be a secret. */
function adminTokenVar(env: NodeJS.ProcessEnv): string | null {
  const raw = env.TAGSCHED_ADMIN_TOKEN;
  if (!raw) return null;
  if (raw.length < ADMIN_TOKEN_MIN_LENGTH) {
    throw new ConfigError(
      `TAGSCHED_ADMIN_TOKEN is ${raw.length} characters long; it must have at least ${ADMIN_TOKEN_MIN_LENGTH} (e.g. openssl rand -base64 32)`,
    );
  }
  return raw;
}

/** A host or process name: 1–100 printable characters, no spaces; unset or empty is null. */
function nameVar(env: NodeJS.ProcessEnv, name: string): string | null {
  const raw = env[name];
  if (!raw) return null;
  if (!/^[\x21-\x7e]{1,100}$/.test(raw))
    throw new ConfigError(
      `${name} must be 1 to 100 printable ASCII characters without spaces, got ${JSON.stringify(raw.slice(0, 120))}`,
    );
  return raw;
}

/** TAGSCHED_DATABASE_SESSION_URL: unset or empty is null (DATABASE_URL is the session URL too); it needs DATABASE_URL. */
function sessionUrlVar(env: NodeJS.ProcessEnv): string | null {
  const raw = env.TAGSCHED_DATABASE_SESSION_URL;
  if (!raw) return null;
  if (!env.DATABASE_URL)
    throw new ConfigError(
      'TAGSCHED_DATABASE_SESSION_URL is set without DATABASE_URL: the embedded database has no session URL',
    );
  return raw;
}

/** TAGSCHED_DATABASE_POOL_SIZE: a whole number from 1 to 1000, 10 when unset. */
function poolSizeVar(env: NodeJS.ProcessEnv): number {
  const n = intVar(env, 'TAGSCHED_DATABASE_POOL_SIZE', 10);
  if (!Number.isInteger(n) || n < 1 || n > 1000)
    throw new ConfigError(
      `TAGSCHED_DATABASE_POOL_SIZE must be a whole number from 1 to 1000, got "${env.TAGSCHED_DATABASE_POOL_SIZE}"`,
    );
  return n;
}
