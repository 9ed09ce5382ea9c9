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
  /** How long a released request is not offered again to the worker that released it. */
  readonly releaseBackoffMs: number;
  /** Consecutive ERROR results after which a worker is quarantined, when the same tasks succeed elsewhere; 0: never. */
  readonly quarantineAfterErrors: number;
  /** How often a quarantined, idle, connected worker is given a quarantine probe (services/work/quarantine-probes.ts), in milliseconds; 0: never. */
  readonly quarantineProbeMs: number;
  /** A task whose average run over the last 30 days is at least this long is heavy work (scheduler/rules/heavy-work.ts), in seconds; 0: never by history. */
  readonly heavyTaskSeconds: number;
  /** Requests ask for the memory and disk their task, package and architecture used lately (core/tasks/learned-requirements.ts). */
  readonly learnedRequirements: boolean;
  /** Learned minimums read the runs of every workspace, private ones included, not only the request's own and public ones: a disclosure (docs/reference/statistics.md). */
  readonly sharedHistory: boolean;
  readonly maxTaskDataBytes: number;
  readonly maxTagsPerSet: number;
  /** Most requests one createWorkRequests call accepts. */
  readonly maxBatchRequests: number;
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
  /** What one operation may ask for, and what a client may send (docs/design.md: limits and tokens); see `src/api/limits/`. */
  readonly limits: Limits;
  /** Whether introspection (`__schema`, `__type`) is answered; off in production unless asked for. */
  readonly introspection: boolean;
  /** Whether validation errors suggest field names ("Did you mean …?"); off in production unless asked for. */
  readonly fieldSuggestions: boolean;
  /** How long a create's idempotency key answers retries, in milliseconds. */
  readonly idempotencyKeyTtlMs: number;
  /** How long a pool-wide activation token is accepted when its creator gives no expiry, in milliseconds. */
  readonly activationTokenTtlMs: number;
  /** The commands `exec` pools may run (absolute paths); empty means exec pools are off. */
  readonly execCommands: readonly string[];
  /** The environment an `exec` command runs with: a few variables of the server's, never its secrets. */
  readonly execEnvironment: Readonly<Record<string, string>>;
  /** The Hetzner Cloud API base URL (`…/v1`), without a trailing slash. */
  readonly hetznerApiUrl: string;
  /** The EC2 endpoint URL; null means the SDK's own endpoint for the account's region. */
  readonly ec2Endpoint: string | null;
  /** The most output kept per work request, in bytes: the first half and the last half when it is longer. */
  readonly maxLogBytes: number;
  /** The bearer token /metrics asks for, and then shows every workspace by name; null: /metrics is open and folds private workspaces. */
  readonly metricsToken: string | null;
  /** Built-in server workers of this process, which run server tasks (src/loops/server-tasks/); 0 for none. */
  readonly serverWorkers: number;
  /** Server tasks each built-in server worker runs at once; 0 also means no server workers. */
  readonly serverWorkerConcurrency: number;
  /** Whether this process runs the provisioner (launches and stops pool instances); off for sites with their own script. */
  readonly provisioner: boolean;
  /** The provisioner's periodic cycle (with reconciliation against every provider's list), in milliseconds. */
  readonly provisionerIntervalMs: number;
  /** How long a cycle triggered by a change waits for more changes to share it, in milliseconds. */
  readonly provisionerDebounceMs: number;
  /** The longest one provider call (launch, terminate, list) may take before it counts as a timeout, in milliseconds. */
  readonly providerTimeoutMs: number;
  /** Between asking an instance to stop (SIGTERM for local agents) and forcing it (SIGKILL), in milliseconds. */
  readonly stopGraceMs: number;
  /** An instance whose worker has not connected this long after its launch is taken as failed, in milliseconds. */
  readonly bootTimeoutMs: number;
  /** The wait before a pool's first launch retry after a failure; it doubles with each failure, in milliseconds. */
  readonly launchBackoffMs: number;
  /** The longest wait between launch retries of a failing pool, in milliseconds. */
  readonly launchBackoffMaxMs: number;
  /** Consecutive failed launches after which a pool shows as degraded. */
  readonly degradedAfterFailures: number;
  /** How long an offering that failed for capacity or quota is skipped by launches, in milliseconds (providers/offerings.ts). */
  readonly offeringUnavailableMs: number;
  /** At most this many launches a minute on one provider account, across the pools that share it; 0: no limit (scheduler/rules/scale-in.ts: rateRoom). */
  readonly accountLaunchesPerMinute: number;
  /** The GraphQL URL launched agents are given; null derives it from HOST and the port listened on. */
  readonly agentServerUrl: string | null;
  /** Where the qemu provider finds the disk images of registered worker images (the output directory of `tagsched-image build`); null: no qemu pool can be made. */
  readonly qemuImageDir: string | null;
  /** Where the qemu provider keeps each virtual machine's overlay, seed, pid file and monitor socket. */
  readonly qemuStateDir: string;
  /** The qemu provider's accelerator: `auto` probes KVM once per image and falls back to TCG. */
  readonly qemuAccel: 'auto' | 'kvm' | 'tcg';
  /** Where providers keep each instance's log (agent output, serial console), also after the instance is gone. */
  readonly instanceLogDir: string;
  /** How long an instance log untouched for that long is kept, in milliseconds. */
  readonly instanceLogRetentionMs: number;
}

/** The bounds of docs/design.md: limits and tokens, each a setting (docs/reference/limits.md). */
export interface Limits {
  /** Deepest selection set of an operation. */
  readonly maxDepth: number;
  /** Most aliases in one operation. */
  readonly maxAliases: number;
  /** Most lexical tokens in one document (counted while it is parsed, so a huge one is cut short). */
  readonly maxTokens: number;
  /** Most directives in one operation. */
  readonly maxDirectives: number;
  /** Highest estimated cost of one operation (src/api/limits/cost.ts says what each field costs). */
  readonly maxCost: number;
  /** Largest HTTP request body, in bytes. */
  readonly maxBodyBytes: number;
  /** Largest WebSocket message, in bytes. */
  readonly maxWsMessageBytes: number;
  /** Open WebSocket connections of one token, per server process. */
  readonly maxConnectionsPerToken: number;
  /** Operations running at once on one WebSocket connection. */
  readonly maxSubscriptionsPerConnection: number;
  /** Failed authentications a client address may make per minute before its attempts get 429. */
  readonly authFailuresPerMinute: number;
  /** Requests without a token a client address may make per minute (HTTP, and operations over anonymous WebSockets); 0: no limit. */
  readonly anonymousRequestsPerMinute: number;
  /** Anonymous WebSockets one client address may hold open at once, per process; 0: no limit. */
  readonly anonymousConnectionsPerAddress: number;
}

/** The shortest TAGSCHED_ADMIN_TOKEN accepted: a value people could guess is not a secret. */
export const ADMIN_TOKEN_MIN_LENGTH = 32;

/** A configuration the service refuses to start with; server.ts prints its message as one line. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Server variables an exec command inherits: a search path, a locale, a home, proxies; nothing else. */
export const EXEC_ENVIRONMENT_VARIABLES = [
  'PATH',
  'HOME',
  'LANG',
  'LC_ALL',
  'TZ',
  'TMPDIR',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
] as const;
/** The shortest TAGSCHED_METRICS_TOKEN accepted: a scraper's token is a secret like any other. */
export const MIN_METRICS_TOKEN_LENGTH = 16;

/** The smallest TAGSCHED_MAX_LOG_BYTES accepted: room for a head and a tail of a few lines each. */
export const MIN_LOG_BYTES = 1024;

function maxLogBytesVar(env: NodeJS.ProcessEnv): number {
  const n = intVar(env, 'TAGSCHED_MAX_LOG_BYTES', 16 * 1024 * 1024); // 16 MiB
  if (!Number.isSafeInteger(n) || n < MIN_LOG_BYTES)
    throw new ConfigError(`TAGSCHED_MAX_LOG_BYTES must be a whole number of bytes, at least ${MIN_LOG_BYTES}, got "${env.TAGSCHED_MAX_LOG_BYTES}"`);
  return n;
}

function metricsTokenVar(env: NodeJS.ProcessEnv): string | null {
  const raw = env.TAGSCHED_METRICS_TOKEN;
  if (!raw) return null;
  if (raw.length < MIN_METRICS_TOKEN_LENGTH || /\s/.test(raw)) {
    throw new ConfigError(`TAGSCHED_METRICS_TOKEN must be at least ${MIN_METRICS_TOKEN_LENGTH} characters with no whitespace`);
  }
  return raw;
}

function intVar(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new ConfigError(`${name} must be a non-negative number, got "${raw}"`);
  return n;
}

/** A number above 0 (a lifetime that must not be nil). */
function positiveIntVar(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const n = intVar(env, name, fallback);
  if (n <= 0) throw new ConfigError(`${name} must be above 0, got "${env[name]}"`);
  return n;
}

/** A whole number from 0 to `max` (a port, a count of things to run). */
function countVar(env: NodeJS.ProcessEnv, name: string, fallback: number, max: number): number {
  const n = intVar(env, name, fallback);
  if (!Number.isInteger(n) || n > max) throw new ConfigError(`${name} must be a whole number from 0 to ${max}, got "${env[name]}"`);
  return n;
}

/** A yes/no variable (1/0, true/false, yes/no, on/off); unset gives the fallback. */
function boolVar(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

/** TAGSCHED_ADMIN_TOKEN, refused when it is too short to be a secret. */
function adminTokenVar(env: NodeJS.ProcessEnv): string | null {
  const raw = env.TAGSCHED_ADMIN_TOKEN;
  if (!raw) return null;
  if (raw.length < ADMIN_TOKEN_MIN_LENGTH) {
    throw new ConfigError(`TAGSCHED_ADMIN_TOKEN is ${raw.length} characters long; it must have at least ${ADMIN_TOKEN_MIN_LENGTH} (e.g. openssl rand -base64 32)`);
  }
  return raw;
}

/** Parses `cpu=4,memory=8,disk=50` (memory and disk in GiB). */
function floorVar(env: NodeJS.ProcessEnv, name: string, fallback: SizeThresholds['medium']): SizeThresholds['medium'] {
  const raw = env[name];
  if (!raw) return fallback;
  const out = { cpuCount: fallback.cpuCount, memoryGib: fallback.memoryGib, diskGib: fallback.diskGib };
  for (const part of raw.split(',')) {
    const [key, value] = part.split('=').map((s) => s.trim());
    const n = Number(value);
    if (!Number.isFinite(n) || n < 0) throw new ConfigError(`${name}: "${part}" is not key=number`);
    if (key === 'cpu') out.cpuCount = n;
    else if (key === 'memory') out.memoryGib = n;
    else if (key === 'disk') out.diskGib = n;
    else throw new ConfigError(`${name}: unknown key "${key}" (expected cpu, memory or disk)`);
  }
  return out;
}

/** Parses `/usr/local/bin/a,/opt/b` into absolute, normalised paths. */
function commandListVar(env: NodeJS.ProcessEnv, name: string): string[] {
  const raw = env[name];
  if (!raw) return [];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((command) => {
      if (!path.isAbsolute(command) || path.normalize(command) !== command) {
        throw new ConfigError(`${name}: "${command}" is not an absolute, normalised path (like /usr/local/bin/provider)`);
      }
      return command;
    });
}

function urlVar(env: NodeJS.ProcessEnv, name: string, fallback: string): string;
function urlVar(env: NodeJS.ProcessEnv, name: string, fallback: null): string | null;
function urlVar(env: NodeJS.ProcessEnv, name: string, fallback: string | null): string | null {
  const raw = env[name];
  if (!raw) return fallback;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ConfigError(`${name} must be an http(s) URL, got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

function qemuAccelVar(env: NodeJS.ProcessEnv): Config['qemuAccel'] {
  const value = env.TAGSCHED_QEMU_ACCEL || 'auto';
  if (value === 'auto' || value === 'kvm' || value === 'tcg') return value;
  throw new ConfigError(`TAGSCHED_QEMU_ACCEL must be auto, kvm or tcg, not "${value.slice(0, 40)}"`);
}

function pickEnvironment(env: NodeJS.ProcessEnv, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** Reads the configuration from an environment (process.env by default) into a frozen object. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const dataDir = path.resolve(env.TAGSCHED_DATA_DIR || './data');
  const production = env.NODE_ENV === 'production';
  const config: Config = {
    port: countVar(env, 'PORT', 4000, 65535), // 0: any free port
    host: env.HOST || '0.0.0.0',
    databaseUrl: env.DATABASE_URL || null,
    dataDir,
    adminToken: adminTokenVar(env),
    secretKey: env.TAGSCHED_SECRET_KEY || null,
    logLevel: env.LOG_LEVEL || 'info',
    defaultArchitecture: env.TAGSCHED_DEFAULT_ARCHITECTURE || 'amd64',
    sizeThresholds: {
      medium: floorVar(env, 'TAGSCHED_SIZE_MEDIUM', DEFAULT_SIZE_THRESHOLDS.medium),
      big: floorVar(env, 'TAGSCHED_SIZE_BIG', DEFAULT_SIZE_THRESHOLDS.big),
    },
    metadataFreshMs: intVar(env, 'TAGSCHED_METADATA_FRESH_SECONDS', 65 * 60) * 1000, // 65 minutes
    releaseBackoffMs: intVar(env, 'TAGSCHED_RELEASE_BACKOFF_SECONDS', 10 * 60) * 1000, // ten minutes
    quarantineAfterErrors: intVar(env, 'TAGSCHED_QUARANTINE_AFTER_ERRORS', 5),
    quarantineProbeMs: intVar(env, 'TAGSCHED_QUARANTINE_PROBE_SECONDS', 10 * 60) * 1000, // ten minutes
    heavyTaskSeconds: intVar(env, 'TAGSCHED_HEAVY_TASK_SECONDS', 60 * 60), // one hour
    learnedRequirements: boolVar(env, 'TAGSCHED_LEARNED_REQUIREMENTS', false),
    sharedHistory: boolVar(env, 'TAGSCHED_SHARED_HISTORY', false),
    maxTaskDataBytes: intVar(env, 'TAGSCHED_MAX_TASK_DATA_BYTES', 64 * 1024), // 64 KiB of JSON
    maxTagsPerSet: intVar(env, 'TAGSCHED_MAX_TAGS', 100),
    maxBatchRequests: intVar(env, 'TAGSCHED_MAX_BATCH_REQUESTS', 1000),
    graphiql: !production,
    ackTimeoutMs: intVar(env, 'TAGSCHED_ACK_TIMEOUT_SECONDS', 60) * 1000, // one minute
    heartbeatTimeoutMs: intVar(env, 'TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS', 120) * 1000, // two minutes
    maxRetries: intVar(env, 'TAGSCHED_MAX_RETRIES', 3),
    schedulerAutomatic: env.TAGSCHED_SCHEDULER !== 'manual',
    schedulerIntervalMs: intVar(env, 'TAGSCHED_SCHEDULER_INTERVAL_SECONDS', 10) * 1000, // 10 seconds
    schedulerDebounceMs: intVar(env, 'TAGSCHED_SCHEDULER_DEBOUNCE_MS', 5), // 5 ms
    limits: {
      maxDepth: intVar(env, 'TAGSCHED_MAX_DEPTH', 15),
      maxAliases: intVar(env, 'TAGSCHED_MAX_ALIASES', 20),
      maxTokens: intVar(env, 'TAGSCHED_MAX_TOKENS', 3000),
      maxDirectives: intVar(env, 'TAGSCHED_MAX_DIRECTIVES', 20),
      maxCost: intVar(env, 'TAGSCHED_MAX_COST', 20_000),
      maxBodyBytes: intVar(env, 'TAGSCHED_MAX_BODY_BYTES', 1024 * 1024), // 1 MiB
      maxWsMessageBytes: intVar(env, 'TAGSCHED_MAX_WS_MESSAGE_BYTES', 1024 * 1024), // 1 MiB
      maxConnectionsPerToken: intVar(env, 'TAGSCHED_MAX_CONNECTIONS_PER_TOKEN', 20),
      maxSubscriptionsPerConnection: intVar(env, 'TAGSCHED_MAX_SUBSCRIPTIONS_PER_CONNECTION', 50),
      authFailuresPerMinute: intVar(env, 'TAGSCHED_AUTH_FAILURES_PER_MINUTE', 30),
      anonymousRequestsPerMinute: intVar(env, 'TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE', 600),
      anonymousConnectionsPerAddress: intVar(env, 'TAGSCHED_ANONYMOUS_CONNECTIONS_PER_ADDRESS', 50),
    },
    introspection: boolVar(env, 'TAGSCHED_INTROSPECTION', !production),
    fieldSuggestions: boolVar(env, 'TAGSCHED_FIELD_SUGGESTIONS', !production),
    idempotencyKeyTtlMs: intVar(env, 'TAGSCHED_IDEMPOTENCY_KEY_TTL_SECONDS', 24 * 60 * 60) * 1000, // one day
    activationTokenTtlMs: positiveIntVar(env, 'TAGSCHED_ACTIVATION_TOKEN_TTL_SECONDS', 24 * 60 * 60) * 1000, // one day
    execCommands: commandListVar(env, 'TAGSCHED_EXEC_COMMANDS'),
    execEnvironment: pickEnvironment(env, EXEC_ENVIRONMENT_VARIABLES),
    hetznerApiUrl: urlVar(env, 'TAGSCHED_HETZNER_API_URL', 'https://api.hetzner.cloud/v1'),
    ec2Endpoint: urlVar(env, 'TAGSCHED_EC2_ENDPOINT', null),
    maxLogBytes: maxLogBytesVar(env),
    metricsToken: metricsTokenVar(env),
    serverWorkers: countVar(env, 'TAGSCHED_SERVER_WORKERS', 1, 64),
    serverWorkerConcurrency: countVar(env, 'TAGSCHED_SERVER_WORKER_CONCURRENCY', 4, 1024),
    provisioner: boolVar(env, 'TAGSCHED_PROVISIONER', true),
    provisionerIntervalMs: intVar(env, 'TAGSCHED_PROVISIONER_INTERVAL_SECONDS', 30) * 1000, // 30 seconds
    provisionerDebounceMs: intVar(env, 'TAGSCHED_PROVISIONER_DEBOUNCE_MS', 1000), // one second
    providerTimeoutMs: intVar(env, 'TAGSCHED_PROVIDER_TIMEOUT_SECONDS', 60) * 1000, // one minute
    stopGraceMs: intVar(env, 'TAGSCHED_STOP_GRACE_SECONDS', 60) * 1000, // one minute
    bootTimeoutMs: intVar(env, 'TAGSCHED_BOOT_TIMEOUT_SECONDS', 600) * 1000, // ten minutes
    launchBackoffMs: intVar(env, 'TAGSCHED_LAUNCH_BACKOFF_SECONDS', 30) * 1000, // 30 seconds, doubling
    launchBackoffMaxMs: intVar(env, 'TAGSCHED_LAUNCH_BACKOFF_MAX_SECONDS', 900) * 1000, // 15 minutes
    degradedAfterFailures: Math.max(1, intVar(env, 'TAGSCHED_DEGRADED_AFTER_FAILURES', 3)),
    offeringUnavailableMs: intVar(env, 'TAGSCHED_OFFERING_UNAVAILABLE_SECONDS', 180) * 1000, // three minutes
    accountLaunchesPerMinute: intVar(env, 'TAGSCHED_ACCOUNT_LAUNCHES_PER_MINUTE', 0),
    agentServerUrl: urlVar(env, 'TAGSCHED_AGENT_SERVER_URL', null),
    qemuImageDir: env.TAGSCHED_QEMU_IMAGE_DIR ? path.resolve(env.TAGSCHED_QEMU_IMAGE_DIR) : null,
    qemuStateDir: path.resolve(env.TAGSCHED_QEMU_STATE_DIR || path.join(dataDir, 'qemu')),
    qemuAccel: qemuAccelVar(env),
    instanceLogDir: path.join(dataDir, 'instance-logs'),
    instanceLogRetentionMs: positiveIntVar(env, 'TAGSCHED_INSTANCE_LOG_RETENTION_DAYS', 14) * 24 * 60 * 60 * 1000, // two weeks
    ...overrides,
  };
  return Object.freeze(config);
}
