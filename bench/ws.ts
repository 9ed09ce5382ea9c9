/**
 * `npm run bench:ws`: the WebSocket side of docs/design.md: quality bars on a real server process.
 *
 *   - create → assignment at a subscribed worker: with 1,000 idle workers connected over graphql-ws
 *     and subscribed to `assignments`, a request is created over HTTP (admin), one at a time, and the
 *     time until its assignment arrives at the worker's client is measured (automatic passes on,
 *     default debounce); the worker then acknowledges and completes it over HTTP before the next one.
 *     Target: p99 ≤ 50 ms.
 *   - memory per idle connection: RSS and V8 heap of the server process (measured inside it, after a
 *     full GC) with 0, 1,000 and 5,000 open idle subscribed connections. Target: < 100 KiB each.
 *
 * The server runs in a child process (this file with `--server`: buildApp on a fresh database
 * `tagsched_bench_ws`), so that the clients do not share its event loop. Options:
 *   --requests N   measured requests (default 300, after 20 warm-up ones)
 *   --idle N       connections for the last memory point (default 5000)
 *   --workers N    connected workers for the latency, and the client phase's workers (default 1000)
 *   --cpu-prof FILE    write a CPU profile of the server process during the latency measurement
 *   --heap-snapshots PREFIX   write heap snapshots of the server at each memory point (PREFIX-<n>.heapsnapshot)
 *   --settle S     seconds of quiet before each memory point (default 2)
 *   --storm N      subscribers of workerChanged for the fan-out storm (default 2000; 0 skips it)
 *   --storm-events N   worker reports during the storm, each one workerChanged event (default 20)
 *   --db-name NAME the bench database (default tagsched_bench_ws)
 *   --only LIST    which parts run: `cycle` (submission and worker cycle, bench/worker-cycle.ts, on a server
 *                  and database of their own), `latency` (everything above); default both; `clients` (the
 *                  client phase, bench/clients.ts, on a server and database of their own, run first when asked)
 *   --clients-pending N      the client phase's queue submitted before it measures (default 10000)
 *   --clients-concurrency N  its clients sending at once in its concurrent parts (default 16)
 *   --clients-scale X        its calls in parts a–c times X (default 1; `npm run bench -- --quick` gives 0.2)
 *   --seed N       its choice of random workers (default 20261121)
 *   --json FILE    write the client phase's result as JSON ({ clients: …, label, measuredAt })
 *   The client phase against a server this bench does not start (bench/same-machine.sh starts them):
 *   --external-url URL       the server's GraphQL endpoint (http://HOST:PORT/graphql); no server is forked and no
 *                            database is made or dropped. The server must run with TAGSCHED_SCHEDULER=manual, on a
 *                            database without work requests (the phase creates its workspace 'debian/main')
 *   --external-pid PID       its process (required with --external-url): its CPU time is utime + stime of
 *                            /proc/PID/stat, its RSS VmRSS of /proc/PID/status, read as it is (no GC can be forced)
 *   --external-database-url URL   its database: checked to hold no work request before the phase, and where
 *                            the queue is copied in SQL for an API without createWorkRequests (required with --api 0.1.0)
 *   --admin-token TOKEN      an admin token of that server (default: the one this bench gives the servers it forks)
 *   --api VERSION  the documents sent: `current` (default; bench/clients.ts) or `0.1.0` (bench/baselines/api-0.1.0.ts,
 *                  only with --external-url: the forked server is this checkout's)
 *   --label TEXT   what was measured, kept in the --json file (e.g. the checkout and commit of the server)
 *   --baseline-json FILE     compare with the run whose --json FILE this is (e.g. 0.1.0 measured on this machine
 *                  just before) instead of bench/baselines/0.1.0.json, and show both runs in the table
 *   --cycle-workers N   agent-like workers of the worker cycle (default 1000)
 *   --cycle-requests N  requests submitted, then drained by them (default 20000)
 *   --submit-batch N    requests per createWorkRequests call (default 1000)
 *   --cycle-over WAY    how the cycle's workers acknowledge and report: `connection` (default: over their
 *                  graphql-ws connection, as the agent does) or `http` (a request each, as agents before 0.2)
 *   With --only cycle, --cpu-prof FILE writes FILE-submit.cpuprofile and FILE-cycle.cpuprofile; with
 *   clients, FILE-clients.cpuprofile (parts a–d of the client phase).
 *
 *   - fan-out storm: N graphql-ws clients (of N/20 users, 20 connections each) subscribed to
 *     `workerChanged { name status activeWorkCount pool { name } }`; one worker reports its metadata
 *     `--storm-events` times over HTTP, one report after the other; every event reaches every
 *     subscriber. Measured: events delivered per second (N × events over the time from the first
 *     report to the last delivery), and, all the while, the latency of a plain API query
 *     (`workers(first: 10)`) from another client, one after the other.
 * BENCH_DATABASE_URL (default postgres://root@127.0.0.1:5432/postgres) names the PostgreSQL server;
 * BENCH_SERVER_FLAGS adds node flags to the server process (e.g. --compact-on-every-full-gc). The
 * bench database is dropped at the end. 5,000 connections need about 10,000 file descriptors
 * (both ends run here): check `ulimit -n`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { Session } from 'node:inspector';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { createClient, type Client } from 'graphql-ws';
import pg from 'pg';
import WebSocket from 'ws';
import { API_0_1_0 } from './baselines/api-0.1.0.js';
import { CURRENT_API, measureClients, type ClientsApi, type ClientsOptions, type ClientsResult } from './clients.js';
import {
  baselineFromResult,
  clientsTable,
  compareWithBaseline,
  formatComparison,
  metricValues,
  readBaseline,
  type Baseline,
} from './clients-report.js';
import { ProcProcess } from './proc.js';
import { assertNoWorkRequests } from './queue-copy.js';
import { META, pool, submit, workerCycle, type CycleTransport, type Spread } from './worker-cycle.js';

const ADMIN = 'tsk_admin_bench-ws-0123456789abcdef';
let DB_NAME = 'tagsched_bench_ws';

interface MemoryPoint {
  /** Used / committed per V8 heap space, for the log. */
  spaces?: Record<string, string>;
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
}

type ToServer =
  | { type: 'memory' }
  | { type: 'cpu' }
  | { type: 'stop' }
  | { type: 'profile-start' }
  | { type: 'profile-stop'; file: string }
  | { type: 'heap-snapshot'; file: string }
  | { type: 'trace' };
/** When the server published an event about a work request (epoch ms, sub-millisecond). */
type TraceEntry = [topic: string, workRequestId: number, at: number];
type FromServer =
  | { type: 'listening'; url: string; pid: number }
  | { type: 'cpu'; micros: number }
  | ({ type: 'memory' } & MemoryPoint)
  | { type: 'profiled' }
  | { type: 'trace'; entries: TraceEntry[] };

/** Now, in epoch milliseconds with sub-millisecond precision: comparable across the two processes. */
const clock = () => performance.timeOrigin + performance.now();

// ---------------------------------------------------------------------------------------------
// The server process.

async function serveForBench(): Promise<void> {
  const { buildApp } = await import('../src/server/app.js');
  const { loadConfig } = await import('../src/core/config/config.js');
  const app = await buildApp(loadConfig());
  // Each event the server publishes about a request, timed: where the create → push time goes.
  const trace: TraceEntry[] = [];
  const publish = app.events.publish.bind(app.events) as (...args: unknown[]) => void;
  (app.events as { publish: unknown }).publish = (...args: unknown[]) => {
    const payload = args.at(-1) as { id?: number; workRequestId?: number };
    const id =
      args[0] === 'workAssigned' ? payload.workRequestId : args[0] === 'workRequestChanged' ? payload.id : undefined;
    if (id !== undefined && trace.length < 100_000) trace.push([args[0] as string, id, clock()]);
    publish(...args);
  };
  // The create's commit is when it hands its new request to the scheduler's placement.
  const placeNew = app.scheduler.placeNew.bind(app.scheduler);
  app.scheduler.placeNew = (request) => {
    if (trace.length < 100_000) trace.push(['placeNew', request.id, clock()]);
    return placeNew(request);
  };
  const { url } = await app.start();
  const send = (m: FromServer) => process.send!(m);
  const gc = (globalThis as { gc?: () => void }).gc;
  const inspector = new Session();
  inspector.connect();
  process.on('message', (m: ToServer) => {
    if (m.type === 'memory') {
      // Twice: the first collection may leave what finalizers free for the second.
      gc?.();
      gc?.();
      const { rss, heapTotal, heapUsed, external } = process.memoryUsage();
      const spaces = Object.fromEntries(
        v8
          .getHeapSpaceStatistics()
          .map((h) => [
            h.space_name,
            `${Math.round(h.space_used_size / 2 ** 20)}/${Math.round(h.space_size / 2 ** 20)} MiB`,
          ]),
      );
      send({ type: 'memory', rss, heapTotal, heapUsed, external, spaces });
    } else if (m.type === 'cpu') {
      const { user, system } = process.cpuUsage();
      send({ type: 'cpu', micros: user + system });
    } else if (m.type === 'trace') {
      send({ type: 'trace', entries: trace.splice(0) });
    } else if (m.type === 'heap-snapshot') {
      const out = fs.openSync(m.file, 'w');
      const write = (message: { params: { chunk: string } }) => fs.writeSync(out, message.params.chunk);
      inspector.on('HeapProfiler.addHeapSnapshotChunk', write as never);
      inspector.post('HeapProfiler.takeHeapSnapshot', { reportProgress: false }, () => {
        inspector.off('HeapProfiler.addHeapSnapshotChunk', write as never);
        fs.closeSync(out);
        send({ type: 'profiled' });
      });
    } else if (m.type === 'profile-start') {
      inspector.post('Profiler.enable', () => inspector.post('Profiler.start'));
    } else if (m.type === 'profile-stop') {
      inspector.post('Profiler.stop', (err, { profile }) => {
        if (err) console.error(`profiling failed: ${err.message}`);
        else fs.writeFileSync(m.file, JSON.stringify(profile));
        send({ type: 'profiled' });
      });
    } else if (m.type === 'stop') {
      void app.stop().finally(() => process.exit(0));
    }
  });
  process.on('disconnect', () => process.exit(1)); // the bench died: do not outlive it
  send({ type: 'listening', url, pid: process.pid });
}

// ---------------------------------------------------------------------------------------------
// The bench.

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const ms = (n: number) => `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`;
const kib = (bytes: number) => `${int(bytes / 1024)} KiB`;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];

/** The --cycle-over value, checked. */
function cycleTransport(value: string | undefined): CycleTransport {
  if (value === 'connection' || value === 'http') return value;
  throw new Error(`--cycle-over: expected connection or http, got ${value}`);
}

function adminDbUrl(): string {
  return process.env.BENCH_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
}

async function freshDatabase(): Promise<string> {
  const c = new pg.Client({ connectionString: adminDbUrl() });
  await c.connect();
  try {
    await c.query(`drop database if exists "${DB_NAME}" with (force)`);
    await c.query(`create database "${DB_NAME}"`);
  } finally {
    await c.end();
  }
  const u = new URL(adminDbUrl());
  u.pathname = `/${DB_NAME}`;
  return u.toString();
}

async function dropDatabase(): Promise<void> {
  const c = new pg.Client({ connectionString: adminDbUrl() });
  await c.connect();
  try {
    await c.query(`drop database if exists "${DB_NAME}" with (force)`);
  } finally {
    await c.end();
  }
}

class ServerProcess {
  private waiting: ((m: FromServer) => void)[] = [];
  private constructor(
    readonly child: ChildProcess,
    readonly url: string,
  ) {
    child.on('message', (m: FromServer) => this.waiting.shift()?.(m));
  }

  /** `env` adds to (or overrides) the server's environment. */
  static start(databaseUrl: string, env: Record<string, string> = {}): Promise<ServerProcess> {
    const child = fork(fileURLToPath(import.meta.url), ['--server'], {
      execArgv: [
        '--import',
        'tsx',
        '--expose-gc',
        ...(process.env.BENCH_SERVER_FLAGS ?? '').split(' ').filter(Boolean),
      ],
      env: {
        ...process.env,
        DATABASE_URL: databaseUrl,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        NODE_ENV: 'production',
        TAGSCHED_ADMIN_TOKEN: ADMIN,
        TAGSCHED_SECRET_KEY: 'bench-ws-secret-key',
        // A pushed assignment waits in the client's queue while it runs the one before: on a loaded
        // machine that can pass the default minute, and a lease taken back is work done twice.
        TAGSCHED_ACK_TIMEOUT_SECONDS: process.env.TAGSCHED_ACK_TIMEOUT_SECONDS ?? '600',
        ...env,
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`the server exited with ${code} before listening`)));
      child.once('message', (m: FromServer) => {
        if (m.type !== 'listening') return reject(new Error(`unexpected message ${JSON.stringify(m)}`));
        child.removeAllListeners('exit');
        resolve(new ServerProcess(child, m.url));
      });
    });
  }

  memory(): Promise<MemoryPoint> {
    return new Promise((resolve) => {
      this.waiting.push((m) => resolve(m as MemoryPoint));
      this.child.send({ type: 'memory' } satisfies ToServer);
    });
  }

  profile(file?: string): Promise<void> {
    if (!file) {
      this.child.send({ type: 'profile-start' } satisfies ToServer);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.waiting.push(() => resolve());
      this.child.send({ type: 'profile-stop', file } satisfies ToServer);
    });
  }

  /** The CPU time the server process has used so far (user + system), in milliseconds. */
  cpuMs(): Promise<number> {
    return new Promise((resolve) => {
      this.waiting.push((m) => resolve((m as { micros: number }).micros / 1000));
      this.child.send({ type: 'cpu' } satisfies ToServer);
    });
  }

  trace(): Promise<TraceEntry[]> {
    return new Promise((resolve) => {
      this.waiting.push((m) => resolve((m as { entries: TraceEntry[] }).entries));
      this.child.send({ type: 'trace' } satisfies ToServer);
    });
  }

  heapSnapshot(file: string): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(() => resolve());
      this.child.send({ type: 'heap-snapshot', file } satisfies ToServer);
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.send({ type: 'stop' } satisfies ToServer);
    });
  }
}

async function gql<T = Record<string, any>>(
  url: string,
  query: string,
  variables: Record<string, unknown>,
  token: string,
): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: unknown[] };
  if (!res.ok || body.errors?.length || !body.data)
    throw new Error(`HTTP ${res.status}: ${JSON.stringify(body).slice(0, 500)}`);
  return body.data;
}

/** Registers workers <prefix>-<from>…<prefix>-<to-1> and reports their metadata, so that they are available once connected. */
async function registerWorkers(url: string, from: number, to: number, prefix = 'w'): Promise<string[]> {
  const names = Array.from({ length: to - from }, (_, i) => `${prefix}-${String(from + i).padStart(5, '0')}`);
  return pool(names, 16, async (name) => {
    const d = await gql(
      url,
      `mutation($n: String!) { registerWorker(input: { name: $n }) { ... on WorkerTokenPayload { token } ... on Error { message } } }`,
      { n: name },
      ADMIN,
    );
    const token = d.registerWorker.token as string;
    if (!token) throw new Error(`registerWorker ${name}: ${JSON.stringify(d)}`);
    await gql(
      url,
      `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
      { m: META },
      token,
    );
    return token;
  });
}

/** A lightweight worker: one graphql-ws client subscribed to its assignments; acknowledges and completes them over HTTP. */
class LightWorker {
  readonly client: Client;
  private subscribed!: Promise<void>;
  constructor(
    readonly url: string,
    readonly token: string,
    onAssignment: (id: string, at: number, worker: LightWorker) => void,
  ) {
    this.client = createClient({
      url: url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      lazy: false,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${token}` },
      onNonLazyError: (err) => console.error('connection failed', err),
    });
    this.subscribed = new Promise((resolve, reject) => {
      this.client.on('connected', () => resolve());
      this.client.on('closed', (e) => reject(new Error(`closed before connecting: ${JSON.stringify(e)}`)));
    });
    this.client.subscribe<{ assignments: { id: string } }>(
      { query: 'subscription { assignments { id } }' },
      {
        next: (r) => {
          const at = performance.now();
          if (r.data) onAssignment(r.data.assignments.id, at, this);
        },
        error: (e) => console.error('subscription error', e),
        complete: () => undefined,
      },
    );
  }

  ready(): Promise<void> {
    return this.subscribed;
  }

  async finish(id: string): Promise<void> {
    await gql(
      this.url,
      `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`,
      { id },
      this.token,
    );
    await gql(
      this.url,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id },
      this.token,
    );
  }
}

/** A dashboard client: one graphql-ws connection subscribed to workerChanged, counting what it receives. */
class Watcher {
  readonly client: Client;
  received = 0;
  private readonly connected: Promise<void>;
  constructor(url: string, token: string, onEvent: () => void) {
    this.client = createClient({
      url: url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      lazy: false,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${token}` },
      onNonLazyError: (err) => console.error('watcher connection failed', err),
    });
    this.connected = new Promise((resolve, reject) => {
      this.client.on('connected', () => resolve());
      this.client.on('closed', (e) => reject(new Error(`closed before connecting: ${JSON.stringify(e)}`)));
    });
    this.client.subscribe(
      { query: 'subscription { workerChanged { name status activeWorkCount pool { name } } }' },
      {
        next: (r) => {
          if (r.errors) console.error('watcher error', r.errors);
          this.received++;
          onEvent();
        },
        error: (e) => console.error('watcher subscription error', e),
        complete: () => undefined,
      },
    );
  }
  ready(): Promise<void> {
    return this.connected;
  }
}

/** The fan-out storm (see the header): delivery rate and the latency of a plain query meanwhile. */
async function storm(url: string, workerToken: string, subscribers: number, events: number, log: (m: string) => void) {
  const perUser = 20; // TAGSCHED_MAX_CONNECTIONS_PER_TOKEN's default
  const users = await pool(
    Array.from({ length: Math.ceil(subscribers / perUser) }, (_, i) => `watcher-${i}`),
    8,
    async (name) =>
      (
        await gql(
          url,
          `mutation($u: String!) { createUser(input: { username: $u }) { ... on UserTokenPayload { token } } }`,
          { u: name },
          ADMIN,
        )
      ).createUser.token as string,
  );
  let delivered = 0;
  let allDelivered: () => void = () => undefined;
  const expected = subscribers * events;
  const done = new Promise<void>((r) => (allDelivered = r));
  const onEvent = () => {
    if (++delivered === expected) allDelivered();
  };
  const watchers: Watcher[] = [];
  try {
    let t = performance.now();
    // Connected a few at a time: a connection must initialise within graphql-ws's 3 s.
    await pool(
      Array.from({ length: subscribers }, (_, i) => i),
      50,
      async (i) => {
        const w = new Watcher(url, users[Math.floor(i / perUser)], onEvent);
        watchers.push(w);
        await w.ready();
      },
    );
    await new Promise((r) => setTimeout(r, 2_000)); // every subscription listening
    log(`storm: ${int(subscribers)} watchers of ${users.length} users subscribed in ${ms(performance.now() - t)}`);
    // The plain query, before the storm (the same client, the same query) and during it.
    const probe = async () => {
      const t0 = performance.now();
      await gql(url, '{ workers(first: 10) { edges { node { name } } } }', {}, ADMIN);
      return performance.now() - t0;
    };
    const quiet: number[] = [];
    for (let i = 0; i < 50; i++) quiet.push(await probe());
    const during: number[] = [];
    let storming = true;
    const prober = (async () => {
      while (storming) during.push(await probe());
    })();
    t = performance.now();
    for (let i = 0; i < events; i++) {
      await gql(
        url,
        `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
        { m: { ...META, cpuCount: 4 + (i % 2) } },
        workerToken,
      );
    }
    const reported = performance.now() - t;
    const timeout = setTimeout(
      () => log(`storm: only ${int(delivered)} of ${int(expected)} events delivered after 10 minutes`),
      600_000,
    );
    await done;
    clearTimeout(timeout);
    const elapsed = performance.now() - t;
    storming = false;
    await prober;
    quiet.sort((a, b) => a - b);
    during.sort((a, b) => a - b);
    log(
      `storm: ${int(expected)} events in ${ms(elapsed)}; plain query during it p50 ${ms(quantile(during, 0.5))} p99 ${ms(quantile(during, 0.99))}`,
    );
    return {
      subscribers,
      events,
      users: users.length,
      reportedMs: reported,
      elapsedMs: elapsed,
      rate: expected / (elapsed / 1000),
      quiet,
      during,
    };
  } finally {
    await Promise.all(watchers.map((w) => w.client.dispose()));
  }
}

/** Waits until the server's workers table says `n` workers are connected (their subscriptions are then being set up). */
async function waitConnected(databaseUrl: string, n: number): Promise<void> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    for (;;) {
      const { rows } = await c.query<{ n: number }>(
        'select count(*)::int as n from worker where connected_at is not null',
      );
      if (rows[0].n >= n) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await c.end();
  }
}

/**
 * The submission and worker-cycle measures (bench/worker-cycle.ts) on a server and database of their
 * own: the queue is submitted first, with no worker registered, then the workers register, connect
 * and drain it.
 */
async function cycleMeasures(
  options: { workers: number; requests: number; batch: number; over: CycleTransport; profile?: string },
  log: (m: string) => void,
) {
  const server = await ServerProcess.start(await freshDatabase());
  try {
    const url = server.url;
    await gql(url, `mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`, {}, ADMIN);
    const noop = () => ({ workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} });
    if (options.profile) await server.profile();
    let cpu = await server.cpuMs();
    const submission = await submit(gql, url, ADMIN, options.requests, options.batch, noop);
    const submitCpuMs = (await server.cpuMs()) - cpu;
    if (options.profile) await server.profile(`${options.profile}-submit.cpuprofile`);
    log(
      `submission: ${int(submission.requests)} requests in ${ms(submission.elapsedMs)}: ${int(submission.perSecond)}/s, server CPU ${(submitCpuMs / submission.requests).toFixed(3)} ms per request`,
    );
    let t = performance.now();
    const tokens = await registerWorkers(url, 0, options.workers, 'c');
    log(`registered ${int(tokens.length)} cycle workers in ${ms(performance.now() - t)}`);
    t = performance.now();
    if (options.profile) await server.profile();
    cpu = await server.cpuMs();
    const cycle = await workerCycle(gql, url, tokens, options.requests, log, options.over);
    const cycleCpuMs = (await server.cpuMs()) - cpu;
    if (options.profile) await server.profile(`${options.profile}-cycle.cpuprofile`);
    log(`worker cycle: ${int(cycle.cycles)} in ${ms(performance.now() - t)}: ${int(cycle.perSecond)}/s`);
    // The server's own CPU time per unit of work: what a shared machine's load does not change much.
    return {
      submission,
      cycle,
      cpuMsPerRequest: submitCpuMs / submission.requests,
      cpuMsPerCycle: cycleCpuMs / cycle.cycles,
    };
  } finally {
    await server.stop();
  }
}

/**
 * The client phase (bench/clients.ts) on a server and database of their own. The scheduler is manual:
 * only the clients' requestWork assigns (see bench/clients.ts).
 */
async function clientsMeasures(
  options: ClientsOptions,
  log: (m: string) => void,
  profile?: string,
): Promise<ClientsResult> {
  const server = await ServerProcess.start(await freshDatabase(), { TAGSCHED_SCHEDULER: 'manual' });
  try {
    const measured = {
      url: server.url,
      cpuMs: () => server.cpuMs(),
      memory: async () => ({ ...(await server.memory()), afterGc: true }),
      measuring: (on: boolean) =>
        profile ? server.profile(on ? undefined : `${profile}-clients.cpuprofile`) : Promise.resolve(),
    };
    return await measureClients(measured, ADMIN, options, log);
  } finally {
    await server.stop();
  }
}

/**
 * The client phase against a server this bench did not start (--external-url): its process read from
 * /proc, its database (when given) checked to hold no work request first.
 */
async function externalClientsMeasures(
  server: { url: string; pid: number; databaseUrl?: string; admin: string },
  options: ClientsOptions,
  log: (m: string) => void,
): Promise<ClientsResult> {
  const proc = new ProcProcess(server.pid);
  if (server.databaseUrl) await assertNoWorkRequests(server.databaseUrl);
  const measured = {
    url: server.url,
    cpuMs: () => Promise.resolve(proc.cpuMs()),
    memory: () => Promise.resolve({ rss: proc.rssBytes(), heapUsed: null, afterGc: false }),
  };
  return measureClients(measured, server.admin, { ...options, databaseUrl: server.databaseUrl }, log);
}

/** The APIs --api names. */
const APIS: Record<string, ClientsApi> = { current: CURRENT_API, '0.1.0': API_0_1_0 };

/** What --json writes, and --baseline-json reads. */
interface ClientsRun {
  clients: ClientsResult;
  label?: string;
  measuredAt?: string;
}

/** The baseline a --baseline-json run makes: its every figure, under its API's name. */
function baselineOfRun(file: string): { run: ClientsRun; baseline: Baseline } {
  const run = JSON.parse(fs.readFileSync(file, 'utf8')) as ClientsRun;
  const measured = `${run.label ?? file}, measured on this machine at ${run.measuredAt ?? 'an unknown time'}`;
  return { run, baseline: baselineFromResult(run.clients, run.clients.api, measured) };
}

/** The table rows of the submission and worker-cycle measures. */
function cycleRows(r: Awaited<ReturnType<typeof cycleMeasures>>): string[] {
  const { submission: s, cycle: c } = r;
  const pair = (x: Spread) => `${ms(x.p50)} / ${ms(x.p99)}`;
  const cpu = (x: number) => `${x.toFixed(2)} ms`;
  return [
    `| submission: createWorkRequests, ${int(s.requests)} requests in batches of ${int(s.batch)}, requests/s | ${int(s.perSecond)} | ≥ 5,000 ${s.perSecond >= 5000 ? '✅' : '❌'} |`,
    `| submission: one batch answered, p50 / p99 | ${pair(s.batchMs)} | |`,
    `| worker cycle: ${int(c.workers)} agents over WebSocket (start and complete ${c.over === 'http' ? 'over HTTP' : 'over the connection'}), ${int(c.cycles)} requests drained, cycles/s | ${int(c.perSecond)} | ≥ 1,000 ${c.perSecond >= 1000 ? '✅' : '❌'} |`,
    `| worker cycle: assignment pushed (wait from completion or subscription), p50 / p99 | ${pair(c.wait)} | |`,
    `| worker cycle: startWorkRequest answered, p50 / p99 | ${pair(c.start)} | |`,
    `| worker cycle: completeWorkRequest answered, p50 / p99 | ${pair(c.complete)} | |`,
    `| worker cycle: assignments taken back before completion (lease expired) | ${int(c.lost)} | 0 |`,
    `| server process CPU per request submitted / per worker cycle | ${cpu(r.cpuMsPerRequest)} / ${cpu(r.cpuMsPerCycle)} | |`,
  ];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      only: { type: 'string', default: 'cycle,latency' },
      'cycle-workers': { type: 'string', default: '1000' },
      'cycle-requests': { type: 'string', default: '20000' },
      'submit-batch': { type: 'string', default: '1000' },
      'cycle-over': { type: 'string', default: 'connection' },
      requests: { type: 'string', default: '300' },
      idle: { type: 'string', default: '5000' },
      workers: { type: 'string', default: '1000' },
      'cpu-prof': { type: 'string' },
      'heap-snapshots': { type: 'string' },
      settle: { type: 'string', default: '2' },
      storm: { type: 'string', default: '2000' },
      'storm-events': { type: 'string', default: '20' },
      'db-name': { type: 'string', default: DB_NAME },
      'clients-pending': { type: 'string', default: '10000' },
      'clients-concurrency': { type: 'string', default: '16' },
      seed: { type: 'string', default: '20261121' },
      'clients-scale': { type: 'string', default: '1' },
      json: { type: 'string' },
      'external-url': { type: 'string' },
      'external-pid': { type: 'string' },
      'external-database-url': { type: 'string' },
      'admin-token': { type: 'string', default: ADMIN },
      api: { type: 'string', default: 'current' },
      label: { type: 'string' },
      'baseline-json': { type: 'string' },
    },
  });
  DB_NAME = values['db-name'];
  const measured = Number(values.requests);
  const idleTotal = Number(values.idle);
  const connected = Number(values.workers);
  const warmup = 20;
  // Before each memory point: the connection storm's garbage collected and the heap given time to shrink.
  const settle = () => new Promise((r) => setTimeout(r, Number(values.settle) * 1000));
  const log = (m: string) => process.stderr.write(`${m}\n`);

  log(
    `bench:ws: ${os.availableParallelism()} CPUs, node ${process.version}; ${values['external-url'] ? `server ${values['external-url']} (PID ${values['external-pid']})` : `database ${DB_NAME}`}`,
  );
  const only = new Set(values.only.split(','));
  // The client phase first, its table and comparison printed at once (the other parts print theirs after).
  const external = values['external-url'];
  if (external && (only.has('cycle') || only.has('latency')))
    throw new Error('--external-url measures the client phase only: use it with --only clients');
  if (only.has('clients')) {
    const api = APIS[values.api];
    if (!api) throw new Error(`--api: ${values.api} is not one of ${Object.keys(APIS).join(', ')}`);
    if (api !== CURRENT_API && !external)
      throw new Error(`--api ${values.api} needs --external-url: the server this bench forks is this checkout's`);
    const options = {
      workers: connected,
      pending: Number(values['clients-pending']),
      concurrency: Number(values['clients-concurrency']),
      seed: Number(values.seed),
      scale: Number(values['clients-scale']),
      api,
    };
    let measured: ClientsResult;
    if (external) {
      const pid = Number(values['external-pid']);
      if (!Number.isInteger(pid) || pid <= 0)
        throw new Error('--external-url needs --external-pid PID: the server process whose CPU and memory are read');
      if (values['cpu-prof']) log('--cpu-prof is ignored with --external-url: the server is not this bench’s child');
      measured = await externalClientsMeasures(
        { url: external, pid, databaseUrl: values['external-database-url'], admin: values['admin-token'] },
        options,
        log,
      );
    } else {
      measured = await clientsMeasures(options, log, values['cpu-prof']);
    }
    if (values.json)
      fs.writeFileSync(
        values.json,
        JSON.stringify(
          { clients: measured, label: values.label, measuredAt: new Date().toISOString() } satisfies ClientsRun,
          null,
          2,
        ),
      );
    const before = values['baseline-json'] ? baselineOfRun(values['baseline-json']) : null;
    const baseline = before?.baseline ?? readBaseline();
    const comparison = compareWithBaseline(baseline, measured.pending, metricValues(measured));
    // The API is named in a heading when it is not today's, or when two runs are side by side.
    const heading = (r: ClientsResult) =>
      `${r.api !== 'current' || before ? `${r.api} API, ` : ''}W=${int(r.workers)}, P=${int(r.pending)}`;
    const columns = [
      ...(before ? [{ heading: heading(before.run.clients), result: before.run.clients }] : []),
      { heading: heading(measured), result: measured },
    ];
    process.stdout.write(`${clientsTable(columns)}\n\n${formatComparison(comparison, measured, baseline)}\n`);
    if (!only.has('cycle') && !only.has('latency')) {
      if (!external) await dropDatabase();
      return;
    }
  }
  const cycles = only.has('cycle')
    ? await cycleMeasures(
        {
          workers: Number(values['cycle-workers']),
          requests: Number(values['cycle-requests']),
          batch: Number(values['submit-batch']),
          over: cycleTransport(values['cycle-over']),
          profile: values['cpu-prof'],
        },
        log,
      )
    : null;
  if (!only.has('latency')) {
    await dropDatabase();
    if (cycles)
      process.stdout.write(
        `${['## bench:ws: submission and worker cycle', '', '| measurement | value | target |', '|---|---|---|', ...cycleRows(cycles)].join('\n')}\n`,
      );
    return;
  }
  const databaseUrl = await freshDatabase();
  const server = await ServerProcess.start(databaseUrl);
  const profileFile = values['cpu-prof'];
  const clients: LightWorker[] = [];
  try {
    const url = server.url;
    await gql(url, `mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`, {}, ADMIN);
    let t = performance.now();
    // Only the workers about to connect are registered: a worker that reported its metadata counts as
    // connected (it may pull over HTTP), and every pass would consider it.
    const tokens = await registerWorkers(url, 0, connected);
    log(`registered ${int(tokens.length)} workers and reported their metadata in ${ms(performance.now() - t)}`);
    await settle();
    const mem0 = await server.memory();
    const snapshot = (n: number) =>
      values['heap-snapshots']
        ? server.heapSnapshot(`${values['heap-snapshots']}-${n}.heapsnapshot`)
        : Promise.resolve();
    await snapshot(0);
    log(`0 connections: ${JSON.stringify(mem0)}`);

    // Arrivals: the creator waits on the id it created.
    const arrivals = new Map<string, (at: number, w: LightWorker) => void>();
    const early = new Map<string, { at: number; w: LightWorker }>();
    const onAssignment = (id: string, at: number, w: LightWorker) => {
      const waiter = arrivals.get(id);
      if (waiter) waiter(at, w);
      else early.set(id, { at, w });
    };
    const connect = async (from: number, to: number) => {
      // A client connects as it is made (lazy: false): made 200 at a time, or 10,000 connection attempts
      // at once overflow the server's listen backlog (ECONNRESET).
      await pool(tokens.slice(from, to), 200, async (token) => {
        const client = new LightWorker(url, token, onAssignment);
        clients.push(client);
        await client.ready();
      });
      await waitConnected(databaseUrl, to);
    };

    t = performance.now();
    await connect(0, connected);
    log(`connected ${int(connected)} workers in ${ms(performance.now() - t)}`);
    await settle();
    const mem1 = await server.memory();
    await snapshot(connected);
    log(`${int(connected)} connections: ${JSON.stringify(mem1)}`);

    const latencies: number[] = [];
    const createTimes: number[] = [];
    const sent = new Map<string, { t0: number; arrival: number }>();
    const createOne = async (): Promise<number> => {
      const t0 = performance.now();
      const epoch0 = clock();
      const d = await gql(
        url,
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
        {},
        ADMIN,
      );
      createTimes.push(performance.now() - t0);
      const id = d.createWorkRequest.id as string;
      const { at, w } = await new Promise<{ at: number; w: LightWorker }>((resolve, reject) => {
        const got = early.get(id);
        if (got) {
          early.delete(id);
          return resolve(got);
        }
        const timer = setTimeout(() => reject(new Error(`request ${id} did not arrive in 30 s`)), 30_000);
        arrivals.set(id, (at2, w2) => {
          clearTimeout(timer);
          arrivals.delete(id);
          resolve({ at: at2, w: w2 });
        });
      });
      sent.set(id, { t0: epoch0, arrival: performance.timeOrigin + at });
      await w.finish(id); // the worker is idle again before the next request
      return at - t0;
    };
    for (let i = 0; i < warmup; i++) await createOne();
    createTimes.length = 0;
    sent.clear();
    await server.trace();
    if (profileFile) await server.profile();
    const cpu0 = await server.cpuMs();
    for (let i = 0; i < measured; i++) latencies.push(await createOne());
    // The server process's CPU per measured request: its create, placement and push, and the worker's
    // start and completion after it (PostgreSQL's own CPU is not counted).
    const cpuPerRequest = ((await server.cpuMs()) - cpu0) / measured;
    if (profileFile) await server.profile(profileFile);
    latencies.sort((a, b) => a - b);
    createTimes.sort((a, b) => a - b);
    // Where the time goes, per request: created (the create's commit, when it is handed to the
    // placement), assigned (the placement's or a pass's commit, when the push is published), delivered
    // (at the worker's client).
    const published = new Map<string, { created?: number; assigned?: number }>();
    for (const [topic, id, at] of await server.trace()) {
      const e = published.get(String(id)) ?? {};
      if (topic === 'placeNew' && e.created === undefined) e.created = at;
      if (topic === 'workAssigned' && e.assigned === undefined) e.assigned = at;
      published.set(String(id), e);
    }
    const phases = { created: [] as number[], assigned: [] as number[], delivered: [] as number[] };
    for (const [id, { t0, arrival }] of sent) {
      const e = published.get(id);
      if (e?.created === undefined || e.assigned === undefined) continue;
      phases.created.push(e.created - t0);
      phases.assigned.push(e.assigned - e.created);
      phases.delivered.push(arrival - e.assigned);
    }
    for (const a of Object.values(phases)) a.sort((x, y) => x - y);
    log(
      `latency over ${measured}: p50 ${ms(quantile(latencies, 0.5))}, p99 ${ms(quantile(latencies, 0.99))}, max ${ms(latencies.at(-1)!)}`,
    );

    const stormSize = Number(values.storm);
    const fanOut = stormSize > 0 ? await storm(url, tokens[0], stormSize, Number(values['storm-events']), log) : null;

    let memN: MemoryPoint | null = null;
    if (idleTotal > connected) {
      t = performance.now();
      tokens.push(...(await registerWorkers(url, connected, idleTotal)));
      log(`registered ${int(idleTotal - connected)} more workers in ${ms(performance.now() - t)}`);
      t = performance.now();
      await connect(connected, idleTotal);
      log(`connected ${int(idleTotal)} workers in ${ms(performance.now() - t)}`);
      await settle();
      memN = await server.memory();
      await snapshot(idleTotal);
      log(`${int(idleTotal)} connections: ${JSON.stringify(memN)}`);
    }

    const perConn = (m: MemoryPoint, n: number, key: 'rss' | 'heapUsed') => (m[key] - mem0[key]) / n;
    const p99 = quantile(latencies, 0.99);
    const lines = [
      `## bench:ws (${os.availableParallelism()} CPUs, ${int(connected)} subscribed workers, ${measured} requests one at a time)`,
      '',
      '| measurement | value | target |',
      '|---|---|---|',
      `| create → assignment at the worker, p50 | ${ms(quantile(latencies, 0.5))} | |`,
      `| create → assignment at the worker, p99 | ${ms(p99)} | ≤ 50 ms ${p99 <= 50 ? '✅' : '❌'} |`,
      `| create → assignment at the worker, max | ${ms(latencies.at(-1)!)} | |`,
      `| createWorkRequest answered (HTTP round trip), p50 / p99 | ${ms(quantile(createTimes, 0.5))} / ${ms(quantile(createTimes, 0.99))} | |`,
      `| server process CPU per request (its create and push, the worker's start and completion) | ${ms(cpuPerRequest)} | |`,
      `| ① sent → created (the create committed), p50 / p99 | ${ms(quantile(phases.created, 0.5))} / ${ms(quantile(phases.created, 0.99))} | |`,
      `| ② created → assigned (placement committed, push published), p50 / p99 | ${ms(quantile(phases.assigned, 0.5))} / ${ms(quantile(phases.assigned, 0.99))} | |`,
      `| ③ assigned → delivered at the worker, p50 / p99 | ${ms(quantile(phases.delivered, 0.5))} / ${ms(quantile(phases.delivered, 0.99))} | |`,
      `| server RSS / V8 heap used / committed, 0 connections | ${mib(mem0.rss)} / ${mib(mem0.heapUsed)} / ${mib(mem0.heapTotal)} | |`,
      `| server RSS / V8 heap used / committed, ${int(connected)} connections | ${mib(mem1.rss)} / ${mib(mem1.heapUsed)} / ${mib(mem1.heapTotal)} | |`,
      ...(memN
        ? [
            `| server RSS / V8 heap used / committed, ${int(idleTotal)} connections | ${mib(memN.rss)} / ${mib(memN.heapUsed)} / ${mib(memN.heapTotal)} | |`,
          ]
        : []),
      `| per idle connection (${int(connected)}): RSS / heap used | ${kib(perConn(mem1, connected, 'rss'))} / ${kib(perConn(mem1, connected, 'heapUsed'))} | < 100 KiB |`,
      ...(memN
        ? [
            `| per idle connection (${int(idleTotal)}): RSS / heap used | ${kib(perConn(memN, idleTotal, 'rss'))} / ${kib(perConn(memN, idleTotal, 'heapUsed'))} | < 100 KiB ${perConn(memN, idleTotal, 'rss') < 100 * 1024 ? '✅' : '❌'} |`,
          ]
        : []),
    ];
    if (cycles) lines.push(...cycleRows(cycles));
    if (fanOut) {
      lines.push(
        `| fan-out: ${int(fanOut.subscribers)} workerChanged subscribers (${fanOut.users} users), ${fanOut.events} reports: all delivered in | ${ms(fanOut.elapsedMs)} (reports answered in ${ms(fanOut.reportedMs)}) | |`,
        `| fan-out: events delivered per second | ${int(fanOut.rate)} | |`,
        `| plain query (workers(first: 10)) before the storm, p50 / p99 | ${ms(quantile(fanOut.quiet, 0.5))} / ${ms(quantile(fanOut.quiet, 0.99))} | |`,
        `| plain query during the storm (${fanOut.during.length} queries), p50 / p99 / max | ${ms(quantile(fanOut.during, 0.5))} / ${ms(quantile(fanOut.during, 0.99))} / ${ms(fanOut.during.at(-1)!)} | |`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await Promise.all(clients.map((c) => c.client.dispose()));
    await server.stop();
    await dropDatabase();
  }
}

if (process.argv.includes('--server')) {
  await serveForBench();
} else {
  await main();
  process.exit(0);
}
