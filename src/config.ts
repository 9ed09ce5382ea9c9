import path from 'node:path';
import { DEFAULT_SIZE_THRESHOLDS, type SizeThresholds } from './tags/size-class.js';

/** Everything the service can be told, read once from the environment; nobody else reads process.env. */
export interface Config {
  readonly port: number;
  readonly host: string;
  /** A PostgreSQL URL; null means the embedded PGlite database under `dataDir`. */
  readonly databaseUrl: string | null;
  readonly dataDir: string;
  /** An admin token that must exist after start-up (deployments and scripts); null for none. */
  readonly adminToken: string | null;
  /** Key for encrypting pool provider accounts at rest; null derives one stored in the database directory. */
  readonly secretKey: string | null;
  readonly logLevel: string;
  readonly defaultArchitecture: string;
  readonly sizeThresholds: SizeThresholds;
  readonly metadataFreshMs: number;
  readonly maxTaskDataBytes: number;
  readonly maxTagsPerSet: number;
  readonly graphiql: boolean;
  /** Whether passes run by themselves (on events and periodically); off, only requestWork and explicit passes assign. */
  readonly schedulerAutomatic: boolean;
  /** An assignment not acknowledged (startWorkRequest) within this goes back to PENDING, in milliseconds. */
  readonly ackTimeoutMs: number;
  /** A RUNNING request whose worker has not been heard from for this long is re-queued, in milliseconds. */
  readonly heartbeatTimeoutMs: number;
  /** Re-queues a request may go through before it is ABORTED. */
  readonly maxRetries: number;
  /** The periodic fallback pass, in milliseconds. */
  readonly schedulerIntervalMs: number;
  /** How long a triggered pass waits for more triggers to share it, in milliseconds. */
  readonly schedulerDebounceMs: number;
}

function intVar(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return n;
}

/** Parses `cpu=4,memory=8,disk=50` (memory and disk in GiB). */
function floorVar(env: NodeJS.ProcessEnv, name: string, fallback: SizeThresholds['medium']): SizeThresholds['medium'] {
  const raw = env[name];
  if (!raw) return fallback;
  const out = { cpuCount: fallback.cpuCount, memoryGib: fallback.memoryGib, diskGib: fallback.diskGib };
  for (const part of raw.split(',')) {
    const [key, value] = part.split('=').map((s) => s.trim());
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0) throw new Error(`${name}: "${part}" is not key=number`);
    if (key === 'cpu') out.cpuCount = n;
    else if (key === 'memory') out.memoryGib = n;
    else if (key === 'disk') out.diskGib = n;
    else throw new Error(`${name}: unknown key "${key}" (expected cpu, memory or disk)`);
  }
  return out;
}

/** Reads the configuration from an environment (process.env by default) into a frozen object. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const dataDir = path.resolve(env.TAGSCHED_DATA_DIR || './data');
  const config: Config = {
    port: intVar(env, 'PORT', 4000),
    host: env.HOST || '0.0.0.0',
    databaseUrl: env.DATABASE_URL || null,
    dataDir,
    adminToken: env.TAGSCHED_ADMIN_TOKEN || null,
    secretKey: env.TAGSCHED_SECRET_KEY || null,
    logLevel: env.LOG_LEVEL || 'info',
    defaultArchitecture: env.TAGSCHED_DEFAULT_ARCHITECTURE || 'amd64',
    sizeThresholds: {
      medium: floorVar(env, 'TAGSCHED_SIZE_MEDIUM', DEFAULT_SIZE_THRESHOLDS.medium),
      big: floorVar(env, 'TAGSCHED_SIZE_BIG', DEFAULT_SIZE_THRESHOLDS.big),
    },
    metadataFreshMs: intVar(env, 'TAGSCHED_METADATA_FRESH_SECONDS', 65 * 60) * 1000, // 65 minutes
    maxTaskDataBytes: intVar(env, 'TAGSCHED_MAX_TASK_DATA_BYTES', 64 * 1024), // 64 KiB of JSON
    maxTagsPerSet: intVar(env, 'TAGSCHED_MAX_TAGS', 100),
    graphiql: (env.NODE_ENV ?? 'development') !== 'production',
    ackTimeoutMs: intVar(env, 'TAGSCHED_ACK_TIMEOUT_SECONDS', 60) * 1000, // one minute
    heartbeatTimeoutMs: intVar(env, 'TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS', 120) * 1000, // two minutes
    maxRetries: intVar(env, 'TAGSCHED_MAX_RETRIES', 3),
    schedulerAutomatic: env.TAGSCHED_SCHEDULER !== 'manual',
    schedulerIntervalMs: intVar(env, 'TAGSCHED_SCHEDULER_INTERVAL_SECONDS', 10) * 1000, // 10 seconds
    schedulerDebounceMs: intVar(env, 'TAGSCHED_SCHEDULER_DEBOUNCE_MS', 5), // 5 ms
    ...overrides,
  };
  return Object.freeze(config);
}
