/**
 * The service side of the cluster suite: tagsched server processes behind HAProxy (each with its own port
 * and TAGSCHED_PROCESS_NAME, one secret key and admin token), real agents (bin/tagsched-worker.js) that
 * connect through HAProxy and record every run of their handler in a file, an `exec` pool whose launch
 * script takes about 3 s and records every call, probe workers (a graphql-ws client connected to one
 * process, which never acknowledges what it is given) and a steady submitter of noop requests. Every
 * process is recorded in reaper.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { killGroup, trackGroup, untrackGroup } from './reaper.js';
import { waitFor, type Infra } from './infra.js';

export const ADMIN = 'tsk_admin_cluster-suite-0123456789abcdef';
export const METRICS_TOKEN = 'cluster-suite-metrics-0123456789';
export const SECRET_KEY = 'cluster-suite-secret-key-0123456789';
export const WORKSPACE = 'debian/main';
const AGENT_BIN = path.resolve('bin/tagsched-worker.js');
const SERVER_MAIN = path.resolve('src/server.ts');

/** A JSON log line of a server or an agent (pino: `time` in ms since the epoch). */
export type LogLine = Record<string, any> & { msg?: string; time?: number };

/** Appends each JSON line of `stream` to `into` (and the raw text to `file`). */
function collectLines(stream: NodeJS.ReadableStream, into: LogLine[], file: string): void {
  const out = fs.createWriteStream(file, { flags: 'a' });
  let rest = '';
  stream.on('data', (d: Buffer) => {
    out.write(d);
    rest += d.toString();
    const lines = rest.split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      if (!line.trim()) continue;
      try {
        into.push(JSON.parse(line) as LogLine);
      } catch {
        into.push({ msg: line, time: Date.now() });
      }
    }
  });
  stream.on('end', () => out.end());
}

/** The answer of one GraphQL operation over HTTP. */
export interface GqlAnswer {
  status: number;
  data?: Record<string, any>;
  errors?: unknown[];
}

/** One GraphQL operation over HTTP, with a deadline; a network failure or timeout throws. */
export async function gql(
  url: string,
  query: string,
  variables: Record<string, unknown> = {},
  token: string = ADMIN,
  timeoutMs = 10_000,
): Promise<GqlAnswer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  try {
    return { status: res.status, ...(JSON.parse(text) as { data?: Record<string, any>; errors?: unknown[] }) };
  } catch {
    return { status: res.status, errors: [text.slice(0, 300)] };
  }
}

/** `field` of a successful answer (status 200, no errors, the field set); throws with the answer otherwise. */
export function field(r: GqlAnswer, name: string): Record<string, any> {
  if (r.status !== 200 || r.errors?.length || !r.data?.[name]) throw new Error(`${name}: ${JSON.stringify(r)}`);
  return r.data[name] as Record<string, any>;
}

/** Retries `fn` (an operation a fault may interrupt) until it succeeds or `timeoutMs` passes. */
export function retrying<T>(what: string, fn: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  return waitFor(what, fn, timeoutMs, 250);
}

/** A tagsched server process. */
export interface TagschedProcess {
  index: number;
  name: string;
  port: number;
  /** Its own GraphQL URL (not through HAProxy). */
  url: string;
  pid: number;
  child: ChildProcess;
  logs: LogLine[];
  logFile: string;
  startedAt: number;
  exited: Promise<void>;
  running(): boolean;
  /** SIGTERM, and wait for the exit; its exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  pause(): void;
  resume(): void;
  /** Its /metrics text. */
  metrics(): Promise<string>;
  /** Whether its /metrics says it leads `duty` (tagsched_leader 1), null when the metric is not there. */
  leads(duty: string): Promise<boolean | null>;
}

/** Options of one server process. */
export interface ProcessOptions {
  /** DATABASE_URL through PgBouncer with the session URL apart (default), or both straight to HAProxy's session port. */
  pooler?: boolean;
  /** A port outside HAProxy's list (for a process the suite talks to directly). */
  port?: number;
  name?: string;
  env?: Record<string, string>;
}

/** Settings of every process: fast loops, and the timeouts the issue's targets are about left at their defaults. */
export const PROCESS_ENV: Record<string, string> = {
  NODE_ENV: 'production',
  LOG_LEVEL: 'info',
  TAGSCHED_SCHEDULER_INTERVAL_SECONDS: '1',
  TAGSCHED_PROVISIONER_INTERVAL_SECONDS: '2',
  TAGSCHED_PROVISIONER_DEBOUNCE_MS: '100',
  TAGSCHED_LAUNCH_BACKOFF_SECONDS: '1',
  // The exec pool's instances start no agent: they stay booting for the whole run, never replaced.
  TAGSCHED_BOOT_TIMEOUT_SECONDS: '3600',
  TAGSCHED_STOP_GRACE_SECONDS: '5',
  TAGSCHED_SERVER_WORKERS: '1',
};

export interface Farm {
  infra: Infra;
  dir: string;
  logDir: string;
  /** The processes behind HAProxy, by index (null: not running). */
  processes: (TagschedProcess | null)[];
  /** Every process started, in order (restarts too). */
  started: TagschedProcess[];
  /** Starts process `index` (its port is HAProxy's `t<index+1>`), and waits for it to listen. */
  start(index: number, options?: ProcessOptions): Promise<TagschedProcess>;
  /** Starts a process outside HAProxy's list. */
  startExtra(name: string, options?: ProcessOptions): Promise<TagschedProcess>;
  /** The running processes behind HAProxy. */
  live(): TagschedProcess[];
  /** Waits until HAProxy sees exactly the running processes as UP. */
  balanced(timeoutMs?: number): Promise<void>;
  /** A GraphQL operation through HAProxy (or `url`). */
  gql(query: string, variables?: Record<string, unknown>, token?: string, url?: string): Promise<GqlAnswer>;
  registerWorker(name: string, input?: Record<string, unknown>): Promise<string>;
  agent(name: string, options?: { concurrency?: number; sleep?: string }): Promise<Agent>;
  agents: Agent[];
  /** Every run the agents' handler recorded. */
  executions(): Execution[];
  /** Every call the exec pools' script recorded. */
  launchLog(): LaunchRecord[];
  launchScript: string;
  launchState: string;
  stopAll(): Promise<void>;
}

/** An agent process. */
export interface Agent {
  name: string;
  token: string;
  child: ChildProcess;
  logs: LogLine[];
  logged(msg: string): LogLine[];
  kill(): Promise<void>;
  stop(): Promise<void>;
}

/** One run of the agents' handler. */
export interface Execution {
  id: string;
  agent: string;
  pid: number;
  done: boolean;
  startedAt: number;
}

/** One call of the exec pools' script: a launch begun (`begin`), an instance created (`launched`), one ended. */
export interface LaunchRecord {
  kind: 'begin' | 'launched' | 'terminated';
  pool: string;
  name: string;
  /** The server process that called the script (its parent). */
  ppid: number;
  at: number;
  /** The script's own pid. */
  pid: number;
}

/**
 * The exec pools' script: `launch` sleeps 3 s, then creates the instance (a JSON file in STATE/<pool>) and
 * appends a line to LOG; `list` lists the files; `terminate` removes one. It starts no agent. The server's
 * pid is the script's parent ($PPID): the log says which process called.
 */
const LAUNCH_SCRIPT = `#!/bin/sh
# usage: launch.sh STATE_DIR LOG_FILE (the exec protocol: one JSON request on stdin, one answer on stdout)
state="$1"
log="$2"
req=$(cat)
field() { printf '%s' "$req" | sed -n "s/.*\\"$1\\":\\"\\([^\\"]*\\)\\".*/\\1/p"; }
op=$(field operation)
pool=$(field pool)
dir="$state/$pool"
mkdir -p "$dir"
case "$op" in
launch)
  name=$(field workerName)
  echo "begin $pool $name $PPID $(date +%s%3N) $$" >> "$log"
  sleep 3
  id="cl-$name-$$"
  printf '{"id":"%s","name":"%s","state":"running","createdAt":"%s"}' "$id" "$name" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$dir/$id.json"
  echo "launched $pool $name $PPID $(date +%s%3N) $$" >> "$log"
  printf '{"id":"%s"}\\n' "$id"
  ;;
list)
  printf '{"instances":['
  sep=''
  for f in "$dir"/*.json; do
    [ -e "$f" ] || continue
    printf '%s' "$sep"
    cat "$f"
    sep=','
  done
  printf ']}\\n'
  ;;
terminate)
  id=$(field id)
  rm -f "$dir/$id.json"
  echo "terminated $pool $id $PPID $(date +%s%3N) $$" >> "$log"
  printf '{}\\n'
  ;;
*)
  printf '{"error":{"kind":"invalid","message":"unknown operation","code":"operation"}}\\n'
  exit 1
  ;;
esac
`;

/** The agents' handler: records its start and end (request, agent, pid, time) and sleeps. */
const HANDLER = `#!/bin/sh
echo "start $TAGSCHED_WORK_REQUEST_ID $CLUSTER_AGENT $$ $(date +%s%3N)" >> "$CLUSTER_RUNS_LOG"
sleep "\${CLUSTER_SLEEP:-0.3}"
echo "done $TAGSCHED_WORK_REQUEST_ID $CLUSTER_AGENT $$ $(date +%s%3N)" >> "$CLUSTER_RUNS_LOG"
`;

/** Sets up the farm's files (script, handler, logs) under the infrastructure's directory; starts nothing. */
export function createFarm(infra: Infra): Farm {
  const dir = path.join(infra.dir, 'farm');
  fs.mkdirSync(dir, { recursive: true });
  const logDir = path.join(path.dirname(infra.daemons[0]!.logFile));
  const launchScript = path.join(dir, 'launch.sh');
  const launchState = path.join(dir, 'instances');
  const launchLogFile = path.join(dir, 'launches.log');
  const runsLog = path.join(dir, 'runs.log');
  const handler = path.join(dir, 'handler.sh');
  fs.writeFileSync(launchScript, LAUNCH_SCRIPT, { mode: 0o755 });
  fs.writeFileSync(handler, HANDLER, { mode: 0o755 });
  fs.writeFileSync(launchLogFile, '');
  fs.writeFileSync(runsLog, '');
  fs.mkdirSync(launchState);

  const processes: (TagschedProcess | null)[] = infra.ports.tagsched.map(() => null);
  const started: TagschedProcess[] = [];
  const agents: Agent[] = [];

  async function launch(index: number, name: string, port: number, options: ProcessOptions): Promise<TagschedProcess> {
    const pooler = options.pooler ?? true;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env))
      if (v !== undefined && !k.startsWith('TAGSCHED_') && !k.startsWith('PG')) env[k] = v;
    Object.assign(env, PROCESS_ENV, {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: pooler ? infra.poolerUrl() : infra.sessionUrl(),
      ...(pooler ? { TAGSCHED_DATABASE_SESSION_URL: infra.sessionUrl() } : {}),
      TAGSCHED_PROCESS_NAME: name,
      // node-postgres names its connections after PGAPPNAME: pg_stat_activity tells the processes apart.
      PGAPPNAME: name,
      TAGSCHED_ADMIN_TOKEN: ADMIN,
      TAGSCHED_SECRET_KEY: SECRET_KEY,
      TAGSCHED_METRICS_TOKEN: METRICS_TOKEN,
      TAGSCHED_TRUSTED_PROXIES: '127.0.0.1',
      TAGSCHED_EXEC_COMMANDS: launchScript,
      TAGSCHED_DATA_DIR: path.join(dir, `data-${name}`),
      ...options.env,
    });
    const child = spawn(process.execPath, ['--import', 'tsx', SERVER_MAIN], {
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackGroup(child.pid!);
    const logs: LogLine[] = [];
    const logFile = path.join(logDir, `${name}-${child.pid}.log`);
    collectLines(child.stdout!, logs, logFile);
    child.stderr!.pipe(fs.createWriteStream(`${logFile}.stderr`));
    const exited = new Promise<void>((resolve) =>
      child.once('exit', () => {
        untrackGroup(child.pid!);
        resolve();
      }),
    );
    const running = () => child.exitCode === null && child.signalCode === null;
    const url = `http://127.0.0.1:${port}/graphql`;
    const p: TagschedProcess = {
      index,
      name,
      port,
      url,
      pid: child.pid!,
      child,
      logs,
      logFile,
      startedAt: Date.now(),
      exited,
      running,
      async stop() {
        if (running()) {
          child.kill('SIGCONT');
          child.kill('SIGTERM');
        }
        await exited;
        return child.exitCode;
      },
      async kill() {
        if (running()) killGroup(child.pid!);
        await exited;
      },
      pause: () => void child.kill('SIGSTOP'),
      resume: () => void child.kill('SIGCONT'),
      async metrics() {
        const res = await fetch(`http://127.0.0.1:${port}/metrics`, {
          headers: { authorization: `Bearer ${METRICS_TOKEN}` },
          signal: AbortSignal.timeout(5000),
        });
        return res.text();
      },
      async leads(duty) {
        const text = await p.metrics();
        const line = text.split('\n').find((l) => l.startsWith(`tagsched_leader{duty="${duty}"}`));
        return line ? line.trim().endsWith(' 1') : null;
      },
    };
    await waitFor(
      () => `${name} to listen:\n${fs.readFileSync(`${logFile}.stderr`, 'utf8').slice(-2000)}`,
      () => {
        if (!running()) throw new Error(`${name} exited with ${child.exitCode}`);
        return logs.some((l) => l.msg === 'tagsched is listening');
      },
      120_000,
      100,
    ).catch((err: unknown) => {
      killGroup(child.pid!);
      const stderr = fs.existsSync(`${logFile}.stderr`) ? fs.readFileSync(`${logFile}.stderr`, 'utf8') : '';
      throw new Error(`${String(err)}\n${stderr.slice(-3000)}`);
    });
    started.push(p);
    return p;
  }

  const farm: Farm = {
    infra,
    dir,
    logDir,
    processes,
    started,
    agents,
    launchScript,
    launchState,
    async start(index, options = {}) {
      if (processes[index]?.running()) throw new Error(`process ${index} is running`);
      const p = await launch(index, options.name ?? `tagsched-${index + 1}`, infra.ports.tagsched[index]!, options);
      processes[index] = p;
      return p;
    },
    startExtra(name, options = {}) {
      if (!options.port) throw new Error('an extra process needs a port of its own');
      return launch(-1, name, options.port, options);
    },
    live: () => processes.filter((p): p is TagschedProcess => !!p && p.running()),
    async balanced(timeoutMs = 60_000) {
      let last: Record<string, string> = {};
      await waitFor(
        () => `HAProxy to see the running processes up: ${JSON.stringify(last)}`,
        async () => {
          last = await infra.backendStatus('tagsched');
          return processes.every((p, i) => (p?.running() ? 'UP' : 'DOWN') === (last[`t${i + 1}`] ?? '').split(' ')[0]);
        },
        timeoutMs,
        200,
      );
    },
    gql: (query, variables = {}, token = ADMIN, url = infra.graphqlUrl) => gql(url, query, variables, token),
    async registerWorker(name, input = {}) {
      const r = await retrying(`registerWorker ${name}`, () =>
        farm.gql(
          `mutation($i: RegisterWorkerInput!) { registerWorker(input: $i) { __typename ... on WorkerTokenPayload { token } ... on Error { code message } } }`,
          { i: { name, concurrency: 1, ...input } },
        ),
      );
      const token = field(r, 'registerWorker').token as string | undefined;
      if (!token) throw new Error(`registerWorker ${name}: ${JSON.stringify(r.data)}`);
      return token;
    },
    async agent(name, options = {}) {
      const token = await farm.registerWorker(name, { concurrency: options.concurrency ?? 1 });
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('TAGSCHED_')) env[k] = v;
      Object.assign(env, {
        TAGSCHED_WORKER_TOKEN: token,
        TAGSCHED_HEARTBEAT_INTERVAL: '1',
        TAGSCHED_MAX_BACKOFF: '1',
        TAGSCHED_REQUEST_TIMEOUT: '5',
        TAGSCHED_KEEPALIVE_INTERVAL: '1',
        TAGSCHED_LOG_LEVEL: 'info',
        CLUSTER_AGENT: name,
        CLUSTER_RUNS_LOG: runsLog,
        CLUSTER_SLEEP: options.sleep ?? '0.3',
      });
      const args = [
        AGENT_BIN,
        '--server',
        infra.graphqlUrl,
        '--work-dir',
        path.join(dir, `agent-${name}`),
        '--handler',
        `noop=sh ${handler}`,
      ];
      const child = spawn(process.execPath, args, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      trackGroup(child.pid!);
      const logs: LogLine[] = [];
      collectLines(child.stdout!, logs, path.join(logDir, `agent-${name}.log`));
      child.stderr!.pipe(fs.createWriteStream(path.join(logDir, `agent-${name}.stderr`)));
      const exited = new Promise<void>((resolve) =>
        child.once('exit', () => {
          untrackGroup(child.pid!);
          resolve();
        }),
      );
      const running = () => child.exitCode === null && child.signalCode === null;
      const agent: Agent = {
        name,
        token,
        child,
        logs,
        logged: (msg) => logs.filter((l) => l.msg === msg),
        async kill() {
          if (running()) killGroup(child.pid!);
          await exited;
        },
        async stop() {
          if (running()) child.kill('SIGTERM');
          const timer = setTimeout(() => killGroup(child.pid!), 20_000);
          await exited;
          clearTimeout(timer);
        },
      };
      agents.push(agent);
      await waitFor(`agent ${name} to report its metadata`, () => agent.logged('metadata reported').length > 0, 60_000);
      return agent;
    },
    executions() {
      const byRun = new Map<string, Execution>();
      for (const line of fs.readFileSync(runsLog, 'utf8').split('\n')) {
        const [kind, id, agent, pid, at] = line.split(' ');
        if (kind !== 'start' && kind !== 'done') continue;
        const key = `${id} ${agent} ${pid}`;
        if (kind === 'start') byRun.set(key, { id, agent, pid: Number(pid), done: false, startedAt: Number(at) });
        else if (byRun.has(key)) byRun.get(key)!.done = true;
      }
      return [...byRun.values()];
    },
    launchLog() {
      return fs
        .readFileSync(launchLogFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const [kind, pool, name, ppid, at, pid] = line.split(' ');
          return {
            kind: kind as LaunchRecord['kind'],
            pool,
            name,
            ppid: Number(ppid),
            at: Number(at),
            pid: Number(pid),
          };
        });
    },
    async stopAll() {
      await Promise.all(agents.map((a) => a.kill()));
      await Promise.all(started.map((p) => p.kill()));
    },
  };
  return farm;
}

/** Whether a process exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Creates the workspace every request of the suite goes to; its members may provide `cluster:` tags (what
 * ties a request to an exec pool or a probe).
 */
export async function createWorkspace(farm: Farm): Promise<void> {
  const r = await retrying('createWorkspace', () =>
    farm.gql(`mutation { createWorkspace(input: { name: "${WORKSPACE}" }) { __typename ... on Error { message } } }`),
  );
  const t = r.data?.createWorkspace?.__typename;
  if (t !== 'Workspace' && !/exists|taken|already/i.test(JSON.stringify(r))) throw new Error(JSON.stringify(r));
  const u = await retrying('updateWorkspace', () =>
    farm.gql(
      `mutation { updateWorkspace(input: { name: "${WORKSPACE}", providableTagPrefixes: ["cluster:"] }) { __typename ... on Error { message } } }`,
    ),
  );
  if (u.data?.updateWorkspace?.__typename !== 'Workspace') throw new Error(`updateWorkspace: ${JSON.stringify(u)}`);
}

/** The leases the `leaders` query lists (null when the API has no such query). */
export async function leaders(
  farm: Farm,
  url?: string,
): Promise<{ duty: string; holder: string; term: number; held: boolean }[] | null> {
  const r = await farm.gql(`{ leaders { duty holder term held } }`, {}, ADMIN, url);
  if (r.errors?.length && JSON.stringify(r.errors).includes('Cannot query field')) return null;
  return field(r, 'leaders') as unknown as { duty: string; holder: string; term: number; held: boolean }[];
}

/** The holder of a duty's lease as the `leaders` query reads it from a live process (`via`), or null. */
export async function leaderOf(farm: Farm, duty: string, via?: TagschedProcess): Promise<string | null> {
  const list = await leaders(farm, via?.url);
  if (list === null) throw new Error('the API has no `leaders` query (the leadership is not there)');
  return list.find((l) => l.duty === duty && l.held)?.holder ?? null;
}

/**
 * Submits noop requests through HAProxy at a steady rate until stopped. Each create carries an idempotency
 * key and is retried with it until it is answered, so that a fault never makes it create twice or lose one.
 */
export class Submitter {
  readonly ids = new Set<string>();
  /** When each id was answered. */
  readonly createdAt = new Map<string, number>();
  attempts = 0;
  failedAttempts = 0;
  /** Creates the service refused (an answer that is an error, not a failed attempt). */
  readonly refusals: string[] = [];
  private running = false;
  private loops: Promise<void>[] = [];
  private next = 0;

  constructor(
    private readonly farm: Farm,
    private readonly perSecond: number,
    private readonly prefix = `load-${Date.now()}`,
  ) {}

  start(): void {
    this.running = true;
    // A few loops, so that one create hanging on a paused process does not stop the others.
    for (let i = 0; i < 4; i++) this.loops.push(this.loop(4 / this.perSecond));
  }

  private async loop(intervalSeconds: number): Promise<void> {
    while (this.running) {
      const t = Date.now();
      const key = `${this.prefix}-${this.next++}`;
      await this.createOne(key).catch((err: unknown) => (this.refusals.push(String(err)), ''));
      const wait = intervalSeconds * 1000 - (Date.now() - t);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** Creates one request (the key names it); resolves with its id once an answer came back. */
  async createOne(key: string, extra: Record<string, unknown> = {}): Promise<string> {
    for (;;) {
      this.attempts++;
      try {
        const r = await this.farm.gql(
          `mutation($k: String!, $i: CreateWorkRequestInput!) { createWorkRequest(idempotencyKey: $k, input: $i) { __typename ... on WorkRequest { id } ... on Error { code message } } }`,
          { k: key, i: { workspace: WORKSPACE, taskType: 'worker', taskName: 'noop', taskData: {}, ...extra } },
        );
        const id = r.data?.createWorkRequest?.id as string | undefined;
        if (id) {
          this.ids.add(id);
          this.createdAt.set(id, Date.now());
          return id;
        }
        if (r.data?.createWorkRequest?.__typename && r.data.createWorkRequest.__typename !== 'WorkRequest')
          throw new Error(`createWorkRequest refused: ${JSON.stringify(r.data)}`);
      } catch (err) {
        if (String(err).includes('refused:')) throw err;
      }
      this.failedAttempts++;
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.loops = [];
  }
}

/** A worker connected over graphql-ws to one process, subscribed to its assignments, which never acknowledges them. */
export interface Probe {
  name: string;
  token: string;
  /** The tag that only this probe provides: a request that requires it goes to it alone. */
  tag: string;
  /** The ids pushed to it, with when. */
  received: Map<string, number>;
  connect(url: string): Promise<void>;
  close(): Promise<void>;
}

/** Registers a probe worker (it runs noop, requires `cluster:probe` of its tasks, provides `worker:class:<name>`). */
export async function createProbe(farm: Farm, name: string): Promise<Probe> {
  const tag = `worker:class:${name}`;
  const token = await farm.registerWorker(name, {
    staticMetadata: { providedTags: [tag], requiredTags: ['cluster:probe'] },
  });
  const received = new Map<string, number>();
  let client: Client | null = null;
  return {
    name,
    token,
    tag,
    received,
    async connect(url) {
      await client?.dispose();
      const c = createClient({
        url: url.replace(/^http/, 'ws'),
        webSocketImpl: WebSocket,
        lazy: false,
        retryAttempts: 0,
        connectionParams: { authorization: `Bearer ${token}` },
        onNonLazyError: () => undefined,
      });
      client = c;
      await new Promise<void>((resolve, reject) => {
        c.on('connected', () => resolve());
        c.on('closed', () => reject(new Error(`probe ${name} closed before connecting`)));
      });
      c.subscribe<{ assignments: { id: string } }>(
        { query: `subscription { assignments { id } }` },
        {
          next: (v) => {
            const id = v.data?.assignments.id;
            if (id && !received.has(id)) received.set(id, Date.now());
          },
          error: () => undefined,
          complete: () => undefined,
        },
      );
      const r = await gql(
        url,
        `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename ... on Error { message } } }`,
        { m: { tasks: [{ type: 'worker', name: 'noop', version: 1 }], architectures: ['amd64'] } },
        token,
      );
      if (r.data?.reportWorkerMetadata?.__typename !== 'Worker')
        throw new Error(`probe ${name} metadata: ${JSON.stringify(r)}`);
    },
    async close() {
      await client?.dispose();
      client = null;
    },
  };
}

/** Creates a request only `probe` can take; returns its id. */
export function probeRequest(submitter: Submitter, probe: Probe, key: string): Promise<string> {
  return submitter.createOne(key, { providedTags: ['cluster:probe'], requiredTags: [probe.tag] });
}

/**
 * What the exec pools' requests run: a task no agent of the suite has a handler for and none has run, so
 * that the demand counts each request as a whole instance (no history: the default expected run, far
 * above the pool's target latency) rather than a share of one.
 */
const MMDEBSTRAP = {
  bootstrap_options: { architecture: 'amd64' },
  bootstrap_repositories: [{ mirror: 'http://deb.debian.org/debian', suite: 'trixie' }],
};

/** An exec pool of the suite: its own tags, so that only its requests are its demand. */
export interface ExecPool {
  name: string;
  /** Creates `n` requests only this pool's workers could run. */
  demand(n: number): Promise<string[]>;
  ids: string[];
  /**
   * Instances created (the script finished a launch), launches begun, those still under way (the script
   * runs), and which processes called. A launch whose caller stopped is ended with its script: begun, never
   * under way again, never launched.
   */
  launches(): {
    begun: number;
    launched: number;
    underWay: number;
    names: string[];
    byProcess: Record<number, number>;
  };
  /** Disables the pool and aborts its requests. */
  close(): Promise<void>;
}

/** Creates an exec pool named `name`, with at most `maxActiveInstances` instances. */
export async function createExecPool(
  farm: Farm,
  submitter: Submitter,
  name: string,
  maxActiveInstances: number,
): Promise<ExecPool> {
  const r = await retrying(`createWorkerPool ${name}`, () =>
    farm.gql(
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on Error { code message } ... on InputError { problems { path message } } } }`,
      {
        i: {
          name,
          providerType: 'exec',
          providerAccount: { token: 'cluster-suite' },
          maxActiveInstances,
          idleTimeoutSeconds: 3600,
          providedTags: [`worker:class:${name}`],
          requiredTags: [`cluster:pool-${name}`],
          specifications: {
            command: [farm.launchScript, farm.launchState, path.join(farm.dir, 'launches.log')],
            enableTasks: ['mmdebstrap'],
            architectures: ['amd64'],
          },
        },
      },
    ),
  );
  if (r.data?.createWorkerPool?.__typename !== 'WorkerPool') throw new Error(`createWorkerPool: ${JSON.stringify(r)}`);
  const ids: string[] = [];
  let n = 0;
  return {
    name,
    ids,
    async demand(count) {
      const made = await Promise.all(
        Array.from({ length: count }, () =>
          submitter.createOne(`${name}-demand-${n++}`, {
            taskName: 'mmdebstrap',
            taskData: MMDEBSTRAP,
            providedTags: [`cluster:pool-${name}`],
            requiredTags: [`worker:class:${name}`],
          }),
        ),
      );
      ids.push(...made);
      return made;
    },
    launches() {
      const mine = farm.launchLog().filter((l) => l.pool === name);
      const launched = mine.filter((l) => l.kind === 'launched');
      const byProcess: Record<number, number> = {};
      for (const l of launched) byProcess[l.ppid] = (byProcess[l.ppid] ?? 0) + 1;
      const done = new Set(launched.map((l) => l.pid));
      const underWay = mine.filter((l) => l.kind === 'begin' && !done.has(l.pid) && alive(l.pid)).length;
      return {
        begun: mine.filter((l) => l.kind === 'begin').length,
        launched: launched.length,
        underWay,
        names: launched.map((l) => l.name),
        byProcess,
      };
    },
    async close() {
      await retrying(`disable pool ${name}`, async () =>
        field(
          await farm.gql(
            `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ... on Error { message } } }`,
            { i: { name, enabled: false } },
          ),
          'updateWorkerPool',
        ),
      );
      for (const id of ids)
        await retrying(`abort ${id}`, async () =>
          field(
            await farm.gql(
              `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ... on Error { message } } }`,
              { id },
            ),
            'abortWorkRequest',
          ),
        );
    },
  };
}
