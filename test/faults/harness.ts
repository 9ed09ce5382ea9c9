/**
 * What the fault tests share: real server processes (src/server.ts) on a database of their own,
 * real agents (bin/tagsched-worker.js) as child processes over real WebSockets, a handler that
 * records every execution in a file, and the check that every request ran exactly once or ended
 * ABORTED with a reason. Nothing waits for a fixed time: everything polls for a state, with a
 * generous deadline.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { createTestDatabase } from '../helpers/db.js';
import { httpGql, startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { TcpProxy } from './tcp-proxy.js';

export const ADMIN = 'tsk_admin_fault-tests-0123456789abcdef';
/** How long any single wait may take before the test fails: far above what it needs. */
export const DEADLINE_MS = 60_000;

const AGENT_BIN = path.resolve('bin/tagsched-worker.js');

/** A JSON log line of a server or an agent. */
export type LogLine = Record<string, any> & { msg?: string };

function lineCollector(stream: NodeJS.ReadableStream, into: LogLine[]): void {
  let rest = '';
  stream.on('data', (d: Buffer) => {
    rest += d.toString();
    const lines = rest.split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      if (!line.trim()) continue;
      try {
        into.push(JSON.parse(line) as LogLine);
      } catch {
        into.push({ msg: line });
      }
    }
  });
}

/** Polls `fn` until it returns something other than undefined/false/null; fails after the deadline with `what`. */
export async function until<T>(
  what: string | (() => string),
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = DEADLINE_MS,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown = null;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== null && v !== false) return v as T;
      lastError = null;
    } catch (err) {
      lastError = err; // e.g. the database is being cut: try again
    }
    if (Date.now() > deadline) {
      const label = typeof what === 'function' ? what() : what;
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${label}${lastError ? ` (last error: ${String(lastError)})` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** A server process with its log lines (from "listening" on). */
export interface Server extends ServerProcess {
  name: string;
  port: number;
  logs: LogLine[];
  /** SIGKILL, and wait until it is gone. */
  kill(): Promise<void>;
}

/** An agent process. */
export interface Agent {
  name: string;
  token: string;
  child: ChildProcess;
  logs: LogLine[];
  stderr: () => string;
  logged(msg: string, match?: (l: LogLine) => boolean): LogLine[];
  waitForLog(msg: string, match?: (l: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  signal(signal: NodeJS.Signals): void;
  /** The agent's own process: `child` itself, or under `viaNpx` the node process npm started through `sh -c`. */
  agentPid(): number;
  /** SIGKILL (a SIGSTOPped agent too), and wait until it is gone. */
  kill(): Promise<void>;
  exited: Promise<number | null>;
}

/** One execution of a handler, as the handler recorded it. */
export interface Execution {
  id: string;
  agent: string;
  pid: number;
  done: boolean;
}

export interface AgentOptions {
  /** The worker's name (it is registered first if no token is given). */
  name: string;
  /** The GraphQL URL the agent talks to (a server's, or through a proxy). */
  url: string;
  token?: string;
  concurrency?: number;
  /** How long each handler run takes, in seconds (sleep(1) syntax). */
  sleep?: string;
  /** Shell commands each handler run evaluates before its sleep (to write output). */
  output?: string;
  env?: Record<string, string>;
  /** The tasks it has a handler for, each the recording handler (default: noop). */
  handlers?: readonly string[];
  /** Tags it reports besides what it finds on this machine (`--provided-tag`). */
  providedTags?: readonly string[];
  /** How it is registered (when no token is given): its type (`SIGNING`, …) and static metadata. */
  registration?: RegisterOptions;
  /**
   * Started as `npx --yes tagsched-worker …` from the checkout, in a process group of its own: `child` is
   * npm (npm → sh -c → node); killing the agent kills the whole group.
   */
  viaNpx?: boolean;
}

/** What registerWorker may set besides the name and concurrency. */
export interface RegisterOptions {
  type?: string;
  staticMetadata?: Record<string, unknown>;
  /** The pool it joins (a worker made by hand in a pool: it has no instance). */
  pool?: string;
  /** It shares its resources (CPUs, memory, disk) among its runs instead of counting slots. */
  offersResources?: boolean;
}

export interface Fleet {
  db: { name: string; url: string };
  dir: string;
  /** Starts a server process on this file's database (the first one also creates the workspace debian/main); `preload`: see startServerProcess. */
  server(env?: Record<string, string | undefined>, name?: string, preload?: readonly string[]): Promise<Server>;
  /** Registers (when needed) and starts an agent, and waits until it is connected and has reported. */
  agent(options: AgentOptions): Promise<Agent>;
  proxy(targetPort: number): Promise<TcpProxy>;
  gql(
    url: string,
    query: string,
    variables?: Record<string, unknown>,
    token?: string,
  ): Promise<{ status: number; data?: Record<string, any>; errors?: unknown[] }>;
  sql<T = Record<string, any>>(query: string, params?: unknown[]): Promise<T[]>;
  registerWorker(url: string, name: string, concurrency?: number, options?: RegisterOptions): Promise<string>;
  /** Creates a noop request (as the admin) and returns its id. */
  createNoop(url: string): Promise<string>;
  /** Every execution the handlers recorded, in order. */
  executions(): Execution[];
  /** Terminates every connection the service has to this file's database (what a PostgreSQL restart does to a client). */
  terminateBackends(): Promise<number>;
}

/**
 * Default server knobs of the fault tests: short leases and a fast periodic sweep. Agents heartbeat
 * every second; the heartbeat lease leaves room for a loaded machine to miss a few.
 */
export const FAST_SERVER_ENV = {
  TAGSCHED_ACK_TIMEOUT_SECONDS: '3',
  TAGSCHED_HEARTBEAT_TIMEOUT_SECONDS: '6',
  TAGSCHED_MAX_RETRIES: '3',
  TAGSCHED_SCHEDULER_INTERVAL_SECONDS: '1',
  // No built-in server worker unless a test asks for one (TAGSCHED_SERVER_WORKERS: '1'): the tests
  // count and choose among the agents they start.
  TAGSCHED_SERVER_WORKERS: '0',
} as const;

/**
 * The fleet of one test file: its database (cloned from the template), a temporary directory with
 * the handler and the executions log, and every process and proxy it starts, all stopped and
 * removed after the file (processes are SIGKILLed: a leftover must never outlive the run).
 */
export function useFleet(): Fleet {
  const fleet = {} as Fleet;
  const children: ChildProcess[] = [];
  const groups: number[] = []; // process groups of agents started through npx (the agent outlives npm)
  const proxies: TcpProxy[] = [];
  let drop: (() => Promise<void>) | null = null;
  let dir = '';
  let workspaceCreated: Promise<void> | null = null;
  // FAULT_LOGS=<dir> keeps every server's and agent's output there, for reading a failure.
  const keepLog = (stream: NodeJS.ReadableStream, file: string) => {
    if (!process.env.FAULT_LOGS) return;
    fs.mkdirSync(process.env.FAULT_LOGS, { recursive: true });
    stream.pipe(fs.createWriteStream(path.join(process.env.FAULT_LOGS, file)));
  };

  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-faults-'));
    const runsLog = path.join(dir, 'runs.log');
    const handler = path.join(dir, 'handler.sh');
    // $$ is the handler shell's pid: the test checks it is gone after its agent was killed. With
    // FAULT_FAIL_MATCH, a run whose "TASK_NAME:TASK_JSON" matches that shell pattern exits 1 (FAILURE)
    // once done; it reads the task from stdin, which FAULT_OUTPUT then cannot.
    fs.writeFileSync(
      handler,
      [
        '#!/bin/sh',
        'if [ -n "$FAULT_FAIL_MATCH" ]; then task=$(cat); fi',
        'echo "start $TAGSCHED_WORK_REQUEST_ID $FAULT_AGENT $$" >> "$FAULT_RUNS_LOG"',
        'if [ -n "$FAULT_OUTPUT" ]; then eval "$FAULT_OUTPUT"; fi',
        'sleep "${FAULT_SLEEP:-0.2}"',
        'echo "done $TAGSCHED_WORK_REQUEST_ID $FAULT_AGENT $$" >> "$FAULT_RUNS_LOG"',
        'if [ -n "$FAULT_FAIL_MATCH" ]; then case "$TAGSCHED_TASK_NAME:$task" in $FAULT_FAIL_MATCH) exit 1;; esac; fi',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(runsLog, '');

    const gql: Fleet['gql'] = (url, query, variables = {}, token = ADMIN) => httpGql(url, query, variables, token);
    const ok = (r: Awaited<ReturnType<Fleet['gql']>>, field: string) => {
      if (r.status !== 200 || r.errors?.length || !r.data?.[field])
        throw new Error(`${field} failed: ${JSON.stringify(r)}`);
      return r.data[field] as Record<string, any>;
    };

    Object.assign(fleet, {
      db: { name: db.name, url: db.url },
      dir,
      gql,
      async server(env = {}, name = 'server', preload = []) {
        const serverEnv = {
          DATABASE_URL: db.url,
          TAGSCHED_ADMIN_TOKEN: ADMIN,
          TAGSCHED_SECRET_KEY: 'fault-tests-secret-key',
          TAGSCHED_DATA_DIR: path.join(dir, 'data'),
          NODE_ENV: 'production',
          ...FAST_SERVER_ENV,
          ...env,
        };
        const proc = await startServerProcess(serverEnv, undefined, preload);
        children.push(proc.child);
        const logs: LogLine[] = [];
        lineCollector(proc.child.stdout!, logs);
        keepLog(proc.child.stdout!, `server-${name}-${proc.child.pid}.log`);
        keepLog(proc.child.stderr!, `server-${name}-${proc.child.pid}.stderr`);
        // Every request of the fault tests goes to this workspace, created once (servers may start together).
        workspaceCreated ??= gql(
          proc.url,
          `mutation { createWorkspace(input: { name: "debian/main" }) { __typename ... on Error { message } } }`,
        ).then((r) => {
          if (r.data?.createWorkspace.__typename !== 'Workspace')
            throw new Error(`createWorkspace: ${JSON.stringify(r)}`);
        });
        await workspaceCreated;
        const server: Server = {
          ...proc,
          name,
          port: Number(new URL(proc.url).port),
          logs,
          async kill() {
            if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
            const gone = new Promise<void>((r) => proc.child.once('exit', () => r()));
            proc.child.kill('SIGKILL');
            await gone;
          },
        };
        return server;
      },
      async registerWorker(url, name, concurrency = 1, options = {}) {
        const r = await gql(
          url,
          `mutation($i: RegisterWorkerInput!) { registerWorker(input: $i) { ... on WorkerTokenPayload { token } ... on Error { code message } } }`,
          {
            i: { name, concurrency, ...options },
          },
        );
        const token = ok(r, 'registerWorker').token as string | undefined;
        if (!token) throw new Error(`registerWorker ${name}: ${JSON.stringify(r.data)}`);
        return token;
      },
      async createNoop(url) {
        const r = await gql(
          url,
          `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } ... on Error { code message } } }`,
        );
        const id = ok(r, 'createWorkRequest').id as string | undefined;
        if (!id) throw new Error(`createWorkRequest: ${JSON.stringify(r.data)}`);
        return id;
      },
      async agent(o: AgentOptions) {
        const token = o.token ?? (await fleet.registerWorker(o.url, o.name, o.concurrency ?? 1, o.registration));
        const workDir = path.join(dir, `agent-${o.name}`);
        const env: Record<string, string> = {};
        for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('TAGSCHED_')) env[k] = v;
        Object.assign(env, {
          TAGSCHED_WORKER_TOKEN: token,
          TAGSCHED_HEARTBEAT_INTERVAL: '1',
          TAGSCHED_MAX_BACKOFF: '0.5',
          TAGSCHED_REQUEST_TIMEOUT: '3',
          TAGSCHED_KEEPALIVE_INTERVAL: '1',
          TAGSCHED_LOG_LEVEL: 'debug',
          FAULT_AGENT: o.name,
          FAULT_RUNS_LOG: runsLog,
          FAULT_SLEEP: o.sleep ?? '0.2',
          FAULT_OUTPUT: o.output ?? '',
          ...o.env,
        });
        const flags = [
          ...(o.handlers ?? ['noop']).flatMap((task) => ['--handler', `${task}=sh ${handler}`]),
          ...(o.providedTags ?? []).flatMap((tag) => ['--provided-tag', tag]),
        ];
        const args = ['--server', o.url, '--work-dir', workDir, ...flags];
        const child = o.viaNpx
          ? spawn('npx', ['--yes', 'tagsched-worker', ...args], {
              env,
              stdio: ['ignore', 'pipe', 'pipe'],
              detached: true,
            })
          : spawn(process.execPath, [AGENT_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
        children.push(child);
        if (o.viaNpx) groups.push(child.pid!);
        const logs: LogLine[] = [];
        let err = '';
        lineCollector(child.stdout!, logs);
        keepLog(child.stdout!, `agent-${o.name}-${child.pid}.log`);
        child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
        const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
        const logged = (msg: string, match: (l: LogLine) => boolean = () => true) =>
          logs.filter((l) => l.msg === msg && match(l));
        const agent: Agent = {
          name: o.name,
          token,
          child,
          logs,
          stderr: () => err,
          logged,
          waitForLog: (msg, match, timeoutMs = DEADLINE_MS) =>
            until(
              () =>
                `agent ${o.name} to log "${msg}"; its log:\n${logs.map((l) => JSON.stringify(l)).join('\n')}\n${err}`,
              () => logged(msg, match)[0],
              timeoutMs,
              20,
            ),
          signal: (signal) => void child.kill(signal),
          agentPid: () => (o.viaNpx ? npxAgentPid(child.pid!) : child.pid!),
          async kill() {
            if (o.viaNpx) killGroup(child.pid!);
            if (child.exitCode !== null || child.signalCode !== null) return;
            child.kill('SIGKILL');
            await exited;
          },
          exited,
        };
        await agent.waitForLog('metadata reported');
        return agent;
      },
      async proxy(targetPort) {
        const p = await TcpProxy.start(targetPort);
        proxies.push(p);
        return p;
      },
      async sql(query, params = []) {
        const c = new pg.Client({ connectionString: db.url });
        c.on('error', () => undefined);
        await c.connect();
        try {
          return (await c.query(query, params)).rows;
        } finally {
          await c.end().catch(() => undefined);
        }
      },
      executions() {
        const byRun = new Map<string, Execution>();
        for (const line of fs.readFileSync(runsLog, 'utf8').split('\n')) {
          const [kind, id, agent, pid] = line.split(' ');
          if (kind !== 'start' && kind !== 'done') continue;
          const key = `${id} ${agent} ${pid}`;
          if (kind === 'start') byRun.set(key, { id, agent, pid: Number(pid), done: false });
          else byRun.get(key)!.done = true;
        }
        return [...byRun.values()];
      },
      async terminateBackends() {
        const rows = await fleet.sql<{ n: number }>(
          `select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`,
          [db.name],
        );
        return rows[0].n;
      },
    } satisfies Partial<Fleet>);
  });

  const killAll = async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(
      children.map((c) =>
        c.exitCode !== null || c.signalCode !== null ? null : new Promise((r) => c.once('exit', r)),
      ),
    );
    children.length = 0;
    for (const g of groups.splice(0)) killGroup(g);
    for (const p of proxies) await p.stop();
    proxies.length = 0;
  };
  // Each test starts with no process running and no worker left that a pass could pick: a killed
  // server never marks its workers disconnected, and they must not take the next test's work.
  afterEach(async () => {
    await killAll();
    await fleet.sql(`update worker set enabled = false, connected_at = null`);
  });
  afterAll(async () => {
    await killAll();
    await drop?.();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });
  return fleet;
}

export interface RequestState {
  id: string;
  status: string;
  result: string | null;
  retryCount: number;
  statusReason: string | null;
  worker: string | null;
}

/** The state of requests, read straight from the database. */
export async function states(fleet: Fleet, ids?: readonly string[]): Promise<RequestState[]> {
  const rows = await fleet.sql<{
    id: number;
    status: string;
    result: string | null;
    retry_count: number;
    status_reason: string | null;
    worker: string | null;
  }>(
    `select w.id, w.status, w.result, w.retry_count, w.status_reason, k.name as worker
       from work_request w left join worker k on k.id = w.worker_id
      ${ids ? 'where w.id = any($1::int[])' : ''} order by w.id`,
    ids ? [ids.map(Number)] : [],
  );
  return rows.map((r) => ({
    id: String(r.id),
    status: r.status,
    result: r.result,
    retryCount: r.retry_count,
    statusReason: r.status_reason,
    worker: r.worker,
  }));
}

/** Waits until none of the requests is PENDING, ASSIGNED or RUNNING, and returns their states. */
export async function settled(fleet: Fleet, ids?: readonly string[], timeoutMs = DEADLINE_MS): Promise<RequestState[]> {
  let last: RequestState[] = [];
  return until(
    () =>
      `requests to finish: ${JSON.stringify(last.filter((s) => s.status !== 'COMPLETED' && s.status !== 'ABORTED'))}`,
    async () => {
      last = await states(fleet, ids);
      return last.every((s) => s.status === 'COMPLETED' || s.status === 'ABORTED') && last;
    },
    timeoutMs,
    200,
  );
}

/**
 * The promise of docs/design.md: quality bars: each request ran to completion exactly once (one finished execution,
 * by the worker the server recorded, and COMPLETED SUCCESS), or it is ABORTED with a reason and no
 * execution finished. An execution that started and never finished is allowed only on an agent
 * the test killed (`killed`), and its process must be gone.
 */
export function expectExactlyOnce(
  fleet: Fleet,
  finalStates: readonly RequestState[],
  options: { killed?: readonly string[] } = {},
): { completed: number; aborted: number } {
  const known = new Set(finalStates.map((s) => s.id));
  const executions = fleet.executions().filter((e) => known.has(e.id));
  let completed = 0;
  let aborted = 0;
  for (const s of finalStates) {
    const runs = executions.filter((e) => e.id === s.id);
    const finished = runs.filter((e) => e.done);
    const interrupted = runs.filter((e) => !e.done);
    for (const e of interrupted) {
      expect(
        options.killed ?? [],
        `request ${s.id}: an execution on ${e.agent} never finished, but that agent was not killed`,
      ).toContain(e.agent);
    }
    if (s.status === 'COMPLETED') {
      completed++;
      expect(
        finished.map((e) => e.agent),
        `request ${s.id} must have finished exactly once, on ${s.worker}`,
      ).toEqual([s.worker]);
      expect(s.result).toBe('SUCCESS');
    } else {
      aborted++;
      expect(s.status, `request ${s.id}`).toBe('ABORTED');
      expect(s.statusReason, `request ${s.id} was aborted without a reason`).toMatch(/\S/);
      expect(finished, `request ${s.id} is ABORTED, but an execution finished`).toEqual([]);
    }
  }
  return { completed, aborted };
}

/** Whether a process still exists. */
/** SIGKILLs every process of a process group, if any is left. */
function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // the group is gone
  }
}

/** The child processes of `pid` (Linux: /proc/<pid>/task/<pid>/children). */
function childPids(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** The agent npm started for `npx tagsched-worker`: the node process below npm (under its `sh -c`, or npm's child where sh execs). */
function npxAgentPid(npmPid: number): number {
  for (let level = childPids(npmPid); level.length > 0; level = level.flatMap(childPids)) {
    for (const pid of level) {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0] !== 'sh' && argv.some((a) => a.endsWith('/tagsched-worker'))) return pid;
    }
  }
  throw new Error(`no tagsched-worker process under npm (pid ${npmPid})`);
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
