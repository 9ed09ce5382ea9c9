/**
 * The agent's options: every one can be given as a flag or as an environment variable (a flag
 * wins), read once here into a frozen AgentConfig that nothing else re-reads.
 */
import { EC2_METADATA_URL, INTERRUPTION_SOURCES, type InterruptionSource } from './interruption.js';
import path from 'node:path';
import { Command, Option, type OutputConfiguration } from 'commander';
import { z } from 'zod';
import { validateTagList } from '../core/tags/syntax.js';
import { MEMORY_CGROUP_CHOICES, type MemoryCgroupChoice } from './cgroup.js';
import { ISOLATION_CHOICES, type IsolationChoice } from './isolation.js';
import { SPEED_TEST_DEFAULT_MS, SPEED_TEST_MAX_MS } from './speed.js';

/** pino's levels, plus `silent`. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Everything the agent was told, with durations in milliseconds and paths absolute. */
export interface AgentConfig {
  /** The GraphQL endpoint over HTTP(S). */
  readonly serverUrl: string;
  /** The same endpoint over WebSocket (ws:// or wss://). */
  readonly wsUrl: string;
  readonly token: string | null;
  readonly activationToken: string | null;
  /** The name asked for at activation; null lets the server choose. */
  readonly name: string | null;
  readonly workDir: string;
  readonly stateFile: string;
  /** `--hidden-dir`: the directory handlers do not see (it holds the state file); null: the state file's own. */
  readonly hiddenDir: string | null;
  /** Task name → shell command. */
  readonly handlers: ReadonlyMap<string, string>;
  readonly providedTags: readonly string[];
  readonly heartbeatIntervalMs: number;
  readonly metadataIntervalMs: number;
  readonly maxBackoffMs: number;
  /** One HTTP request, and the WebSocket handshake and acknowledgement. */
  readonly requestTimeoutMs: number;
  /** WebSocket pings; a ping not answered within as long again means the connection is dead. */
  readonly keepAliveMs: number;
  /** How long a handler's output may wait to be sent with more, in milliseconds. */
  readonly logIntervalMs: number;
  readonly logLevel: LogLevel;
  /** `--rotate-token`: trade the worker token for a new one, keep it in the state file, and exit. */
  readonly rotateToken: boolean;
  /** `--handler-user`: the account handlers run as when the agent is root; null for none. */
  readonly handlerUser: string | null;
  /** `--handler-isolation`: `auto` keeps handlers from the token where the machine allows (isolation.ts), `namespace` in namespaces whatever the user or not at all, `none` does not try. */
  readonly handlerIsolation: IsolationChoice;
  /** `--memory-cgroup`: `auto` runs each handler in its own memory cgroup where the machine allows (cgroup.ts), `off` measures the process tree. */
  readonly memoryCgroup: MemoryCgroupChoice;
  /** `--handler-memory-limit`, in bytes: the memory limit of each run's cgroup; null for none. */
  readonly handlerMemoryLimitBytes: number | null;
  /** `--interruption-notice`: where the provider's notice that it takes the machine away is watched for (interruption.ts); `none` watches nothing. */
  readonly interruptionNotice: InterruptionSource;
  /** `--metadata-url`: the instance metadata service the notice is read from. */
  readonly metadataUrl: string;
  readonly interruptionPollMs: number;
  /** `--speed-test`: the host-speed benchmark's time at start, in milliseconds (speed.ts); 0 runs none. */
  readonly speedTestMs: number;
}

/** A flag or variable with a value the agent cannot use; the message says which and why. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The environment variable behind each option. */
export const ENV = {
  server: 'TAGSCHED_SERVER_URL',
  token: 'TAGSCHED_WORKER_TOKEN',
  activationToken: 'TAGSCHED_ACTIVATION_TOKEN',
  name: 'TAGSCHED_WORKER_NAME',
  workDir: 'TAGSCHED_WORK_DIR',
  stateFile: 'TAGSCHED_STATE_FILE',
  hiddenDir: 'TAGSCHED_HIDDEN_DIR',
  handler: 'TAGSCHED_HANDLERS',
  providedTag: 'TAGSCHED_PROVIDED_TAGS',
  heartbeatInterval: 'TAGSCHED_HEARTBEAT_INTERVAL',
  metadataInterval: 'TAGSCHED_METADATA_INTERVAL',
  maxBackoff: 'TAGSCHED_MAX_BACKOFF',
  requestTimeout: 'TAGSCHED_REQUEST_TIMEOUT',
  keepaliveInterval: 'TAGSCHED_KEEPALIVE_INTERVAL',
  logInterval: 'TAGSCHED_LOG_INTERVAL',
  logLevel: 'TAGSCHED_LOG_LEVEL',
  handlerUser: 'TAGSCHED_HANDLER_USER',
  handlerIsolation: 'TAGSCHED_HANDLER_ISOLATION',
  memoryCgroup: 'TAGSCHED_MEMORY_CGROUP',
  handlerMemoryLimit: 'TAGSCHED_HANDLER_MEMORY_LIMIT',
  interruptionNotice: 'TAGSCHED_INTERRUPTION_NOTICE',
  metadataUrl: 'TAGSCHED_METADATA_URL',
  interruptionPoll: 'TAGSCHED_INTERRUPTION_POLL',
  speedTest: 'TAGSCHED_SPEED_TEST',
} as const;
type Key = keyof typeof ENV;

const DEFAULTS = {
  server: 'http://127.0.0.1:4000/graphql',
  workDir: './.tagsched-worker',
  heartbeatInterval: '30',
  metadataInterval: '600', // ten minutes
  maxBackoff: '30',
  requestTimeout: '30',
  keepaliveInterval: '10',
  logInterval: '1',
  logLevel: 'info',
  handlerIsolation: 'auto',
  memoryCgroup: 'auto',
  interruptionNotice: 'none',
  metadataUrl: EC2_METADATA_URL,
  interruptionPoll: '5',
  speedTest: String(SPEED_TEST_DEFAULT_MS),
} as const;

const HANDLER_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]*$/;

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

const HELP_AFTER = `
Handlers:
  A handler runs one task: \`--handler sbuild='run-sbuild --verbose'\`. Its command runs with
  /bin/sh -c in a fresh directory <work-dir>/runs/<id>, with the task JSON
  {"id","taskType","taskName","taskData"} on stdin, stdout and stderr in <work-dir>/runs/<id>/log
  (and sent to the server as they come, every --log-interval), and the environment variables
  TAGSCHED_WORK_REQUEST_ID, TAGSCHED_TASK_NAME, TAGSCHED_PARALLEL (a -jN: the CPUs idle over the
  last minute, shared among the running tasks, at least 1) and TAGSCHED_REASON_FILE. Exit 0 reports
  SUCCESS, 1 FAILURE, anything else (or a signal) ERROR, with the exit code. A FAILURE or ERROR
  takes as its reason what the handler wrote to $TAGSCHED_REASON_FILE, else its last lines of output.
  In ${ENV.handler}, entries are separated by newlines, or by ";" before the next NAME=.
  Only tasks with a handler are offered to the server.

Handler isolation:
  A handler must not read the worker token. An agent running as root runs handlers as
  --handler-user, in new mount and PID namespaces where it can; an agent running as another user
  runs them in new user, mount and PID namespaces (unshare from util-linux). Either way the state
  file's directory (or --hidden-dir) is covered by an empty tmpfs and the agent is not in the
  handler's /proc. Where neither is possible the agent says so in a warning at start and runs
  handlers unprotected; --handler-isolation namespace asks for the namespaces whatever the user
  (root included) and does not start without them.
  Each run reports what it used: wall time, CPU time, peak memory and peak disk used in its
  directory. Peak memory is the kernel's peak of the run's own memory cgroup (a leaf
  tagsched-run-<pid>-<id> under the agent's cgroup, v2 or v1) where the agent can make one, else the
  resident sets of the handler's processes; --handler-memory-limit caps that cgroup.

Signals:
  SIGTERM or SIGINT drains: no new work, running handlers finish and their results are reported,
  then the agent exits 0. A second signal keeps draining; SIGKILL is the hard stop.

Exit codes:
  0 drained   1 unexpected error   2 token refused or activation failed   3 interrupted by the provider   64 bad usage

Configuration advisor:
  \`tagsched-worker advise\` reads this host, asks a few questions (or none, with --yes) and prints
  the configuration it proposes as an environment file (tagsched-worker advise --help).

Examples:
  tagsched-worker --server http://ci.example.org:4000/graphql --token tsk_worker_… \\
    --handler sbuild=/usr/local/lib/tagsched/sbuild --handler noop=true
  ${ENV.activationToken}=tsk_act_… ${ENV.handler}='noop=true' tagsched-worker --name cloud-1
`;

/** The command-line interface, for parsing and for --help. */
export function buildProgram(version: string, output?: OutputConfiguration): Command {
  const program = new Command('tagsched-worker')
    .description('Runs the work requests a tagsched server assigns to this machine, each through a handler command.')
    .version(version, '-V, --version', 'print the version and exit')
    .helpOption('-h, --help', 'show this help and exit')
    .showHelpAfterError('(run with --help for the options)')
    .exitOverride();
  if (output) program.configureOutput(output);
  const option = (flags: string, key: Key, description: string, group: string, shownDefault?: string) => {
    const o = new Option(flags, description).env(ENV[key]).helpGroup(group);
    if (shownDefault !== undefined) o.default(shownDefault, shownDefault);
    program.addOption(o);
    return o;
  };
  const server = 'Server and identity:';
  option(
    '--server <url>',
    'server',
    'the GraphQL endpoint; the WebSocket is the same URL with ws(s)://',
    server,
    DEFAULTS.server,
  );
  option(
    '--token <token>',
    'token',
    'worker token; wins over the state file and --activation-token (prefer the variable: arguments show in ps)',
    server,
  );
  option(
    '--activation-token <token>',
    'activationToken',
    'one-shot pool activation token, traded for a worker token on the first start',
    server,
  );
  option('--name <name>', 'name', 'worker name to ask for at activation; without it the server chooses', server);
  option(
    '--state-file <path>',
    'stateFile',
    'where the activated token is kept, mode 0600',
    server,
    '<work-dir>/state.json',
  );
  program.addOption(
    new Option(
      '--rotate-token',
      'trade the worker token for a new one (the old one is revoked at once), keep the new one in the state file, and exit',
    ).helpGroup(server),
  );
  const work = 'Work:';
  option('--work-dir <dir>', 'workDir', 'runs/<id> directories and the state file live here', work, DEFAULTS.workDir);
  option('--handler <name=command>', 'handler', 'run task <name> with <command> (repeatable)', work).argParser(collect);
  option(
    '--provided-tag <tag>',
    'providedTag',
    'a tag this worker provides (repeatable; comma-separated in the variable)',
    work,
  ).argParser(collect);
  option(
    '--handler-user <user>',
    'handlerUser',
    'when the agent runs as root: the unprivileged user handlers run as',
    work,
  );
  option(
    '--handler-isolation <mode>',
    'handlerIsolation',
    `auto (keep handlers from the token where possible), namespace (in namespaces as the agent's user, root included; no start without) or none`,
    work,
    DEFAULTS.handlerIsolation,
  );
  option(
    '--hidden-dir <dir>',
    'hiddenDir',
    "the directory handlers do not see (their run's directory shown when inside); it must hold the state file",
    work,
    "the state file's",
  );
  option(
    '--memory-cgroup <mode>',
    'memoryCgroup',
    "auto (each run in its own memory cgroup where possible, measured by the kernel) or off (the process tree's memory)",
    work,
    DEFAULTS.memoryCgroup,
  );
  option(
    '--handler-memory-limit <MiB>',
    'handlerMemoryLimit',
    "the memory limit of each run's cgroup, in MiB (swap included); the OOM killer ends a run above it",
    work,
  );
  option(
    '--interruption-notice <source>',
    'interruptionNotice',
    "none, or ec2: watch the instance metadata for a spot interruption notice; on one, the server re-queues this worker's work (no retry counted) and the agent exits 3",
    work,
    DEFAULTS.interruptionNotice,
  );
  option(
    '--metadata-url <url>',
    'metadataUrl',
    'the instance metadata service the notice is read from',
    work,
    DEFAULTS.metadataUrl,
  );
  option(
    '--speed-test <ms>',
    'speedTest',
    `milliseconds of CPU benchmark at start, on one core then on all (reported as worker:cpu-speed and worker:cpu-speed-all); 0 runs none, at most ${SPEED_TEST_MAX_MS}`,
    work,
    DEFAULTS.speedTest,
  );
  const timing = 'Timing (seconds):';
  option(
    '--interruption-poll <s>',
    'interruptionPoll',
    'between two looks for an interruption notice',
    timing,
    DEFAULTS.interruptionPoll,
  );
  option('--heartbeat-interval <s>', 'heartbeatInterval', 'between heartbeats', timing, DEFAULTS.heartbeatInterval);
  option(
    '--metadata-interval <s>',
    'metadataInterval',
    'between reports of the system facts (also sent on every (re)connection)',
    timing,
    DEFAULTS.metadataInterval,
  );
  option(
    '--max-backoff <s>',
    'maxBackoff',
    'longest wait between two attempts to reach the server',
    timing,
    DEFAULTS.maxBackoff,
  );
  option(
    '--request-timeout <s>',
    'requestTimeout',
    'longest wait for one HTTP request or WebSocket handshake',
    timing,
    DEFAULTS.requestTimeout,
  );
  option(
    '--keepalive-interval <s>',
    'keepaliveInterval',
    'WebSocket pings; no answer within as long again is a cut connection',
    timing,
    DEFAULTS.keepaliveInterval,
  );
  option(
    '--log-interval <s>',
    'logInterval',
    "how long a handler's output waits to be sent with more",
    timing,
    DEFAULTS.logInterval,
  );
  option(
    '--log-level <level>',
    'logLevel',
    `JSON log lines on stdout: ${LOG_LEVELS.join(', ')}`,
    'Logging:',
    DEFAULTS.logLevel,
  );
  program.addHelpText('after', HELP_AFTER);
  return program;
}

/** Splits TAGSCHED_HANDLERS: newlines, or ";" where the next NAME= starts (commands may hold ";"). */
export function splitHandlerList(value: string): string[] {
  return value
    .split(/\n|;(?=\s*[A-Za-z0-9][A-Za-z0-9._+-]*=)/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Parses `NAME=COMMAND` entries into a map (a later entry for the same name wins). */
export function parseHandlers(entries: readonly string[]): Map<string, string> {
  const handlers = new Map<string, string>();
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    const name = eq < 0 ? '' : entry.slice(0, eq).trim();
    const command = eq < 0 ? '' : entry.slice(eq + 1).trim();
    if (!HANDLER_NAME.test(name) || !command) {
      throw new UsageError(
        `handler ${JSON.stringify(entry)} is not NAME=COMMAND (a task name of letters, digits and ._+-, then a non-empty command)`,
      );
    }
    handlers.set(name, command);
  }
  return handlers;
}

const secondsSchema = z.coerce.number().finite().positive();
const logLevelSchema = z.enum(LOG_LEVELS);
const serverSchema = z.url({ protocol: /^https?$/ });

/**
 * Reads the options from `argv` (the arguments after the program name) and `env`. Throws a
 * UsageError for a bad value, and commander's CommanderError for --help, --version and unknown
 * flags (after printing; its exitCode is 0 for help and version).
 */
export function parseConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { cwd?: string; version?: string; output?: OutputConfiguration } = {},
): AgentConfig {
  const program = buildProgram(options.version ?? '0.0.0', options.output);
  program.parse([...argv], { from: 'user' });
  const flags = program.opts<Record<string, unknown>>();
  // Only values typed on the command line are taken from commander: the environment comes from
  // `env` (commander would read process.env), and defaults from DEFAULTS.
  const fromCli = (key: Key) => (program.getOptionValueSource(key) === 'cli' ? flags[key] : undefined);
  const fromEnv = (key: Key) => (env[ENV[key]] ? env[ENV[key]] : undefined);
  const text = (key: Key): string | undefined => (fromCli(key) as string | undefined) ?? fromEnv(key);
  const where = (key: Key) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} (or ${ENV[key]})`;

  const seconds = (key: Key & keyof typeof DEFAULTS): number => {
    const raw = text(key) ?? DEFAULTS[key];
    const parsed = secondsSchema.safeParse(raw);
    if (!parsed.success)
      throw new UsageError(`${where(key)} must be a positive number of seconds, got ${JSON.stringify(raw)}`);
    return Math.round(parsed.data * 1000);
  };

  const server = text('server') ?? DEFAULTS.server;
  if (!serverSchema.safeParse(server).success) {
    throw new UsageError(`${where('server')} must be an http:// or https:// URL, got ${JSON.stringify(server)}`);
  }
  const wsUrl = new URL(server);
  wsUrl.protocol = wsUrl.protocol === 'https:' ? 'wss:' : 'ws:';

  const handlerEntries = [
    ...splitHandlerList(fromEnv('handler') ?? ''),
    ...((fromCli('handler') as string[] | undefined) ?? []),
  ];
  const providedTags = [
    ...(fromEnv('providedTag') ?? '').split(/[\s,]+/).filter(Boolean),
    ...((fromCli('providedTag') as string[] | undefined) ?? []),
  ];
  const tagErrors = validateTagList(providedTags, 'provided');
  if (tagErrors.length) throw new UsageError(`${where('providedTag')}: ${tagErrors.map((e) => e.message).join('; ')}`);

  const logLevel = logLevelSchema.safeParse(text('logLevel') ?? DEFAULTS.logLevel);
  if (!logLevel.success) throw new UsageError(`${where('logLevel')} must be one of ${LOG_LEVELS.join(', ')}`);

  const handlerIsolation = text('handlerIsolation') ?? DEFAULTS.handlerIsolation;
  if (!(ISOLATION_CHOICES as readonly string[]).includes(handlerIsolation)) {
    throw new UsageError(
      `${where('handlerIsolation')} must be one of ${ISOLATION_CHOICES.join(', ')}, got ${JSON.stringify(handlerIsolation)}`,
    );
  }

  const memoryCgroup = text('memoryCgroup') ?? DEFAULTS.memoryCgroup;
  if (!(MEMORY_CGROUP_CHOICES as readonly string[]).includes(memoryCgroup)) {
    throw new UsageError(
      `${where('memoryCgroup')} must be one of ${MEMORY_CGROUP_CHOICES.join(', ')}, got ${JSON.stringify(memoryCgroup)}`,
    );
  }
  const limitText = text('handlerMemoryLimit');
  let handlerMemoryLimitBytes: number | null = null;
  if (limitText !== undefined) {
    const mib = Number(limitText);
    // 4 MiB to 1 PiB, whole MiB.
    if (!/^\d+$/.test(limitText.trim()) || !Number.isSafeInteger(mib) || mib < 4 || mib > 2 ** 30) {
      throw new UsageError(
        `${where('handlerMemoryLimit')} must be a whole number of MiB from 4 to ${2 ** 30}, got ${JSON.stringify(limitText)}`,
      );
    }
    handlerMemoryLimitBytes = mib * 2 ** 20;
  }

  const interruptionNotice = text('interruptionNotice') ?? DEFAULTS.interruptionNotice;
  if (!(INTERRUPTION_SOURCES as readonly string[]).includes(interruptionNotice)) {
    throw new UsageError(
      `${where('interruptionNotice')} must be one of ${INTERRUPTION_SOURCES.join(', ')}, got ${JSON.stringify(interruptionNotice)}`,
    );
  }
  const metadataUrl = text('metadataUrl') ?? DEFAULTS.metadataUrl;
  if (!serverSchema.safeParse(metadataUrl).success)
    throw new UsageError(
      `${where('metadataUrl')} must be an http:// or https:// URL, got ${JSON.stringify(metadataUrl)}`,
    );

  const speedText = text('speedTest') ?? DEFAULTS.speedTest;
  const speedTestMs = Number(speedText);
  if (!/^\d+$/.test(speedText.trim()) || speedTestMs > SPEED_TEST_MAX_MS || (speedTestMs > 0 && speedTestMs < 30))
    throw new UsageError(
      `${where('speedTest')} must be 0 or a whole number of milliseconds from 30 to ${SPEED_TEST_MAX_MS}, got ${JSON.stringify(speedText)}`,
    );

  const cwd = options.cwd ?? process.cwd();
  const workDir = path.resolve(cwd, text('workDir') ?? DEFAULTS.workDir);
  const stateFile = text('stateFile');
  const hiddenDir = text('hiddenDir');
  return Object.freeze({
    serverUrl: server,
    wsUrl: wsUrl.toString(),
    token: text('token') ?? null,
    activationToken: text('activationToken') ?? null,
    name: text('name') ?? null,
    workDir,
    stateFile: stateFile ? path.resolve(cwd, stateFile) : path.join(workDir, 'state.json'),
    hiddenDir: hiddenDir ? path.resolve(cwd, hiddenDir) : null,
    handlers: parseHandlers(handlerEntries),
    providedTags: Object.freeze([...new Set(providedTags)]),
    heartbeatIntervalMs: seconds('heartbeatInterval'),
    metadataIntervalMs: seconds('metadataInterval'),
    maxBackoffMs: seconds('maxBackoff'),
    requestTimeoutMs: seconds('requestTimeout'),
    keepAliveMs: seconds('keepaliveInterval'),
    logIntervalMs: seconds('logInterval'),
    logLevel: logLevel.data,
    rotateToken: program.getOptionValueSource('rotateToken') === 'cli',
    handlerUser: text('handlerUser') ?? null,
    handlerIsolation: handlerIsolation as IsolationChoice,
    memoryCgroup: memoryCgroup as MemoryCgroupChoice,
    handlerMemoryLimitBytes,
    interruptionNotice: interruptionNotice as InterruptionSource,
    metadataUrl,
    interruptionPollMs: seconds('interruptionPoll'),
    speedTestMs,
  });
}
