/**
 * The two measures of `npm run bench:ws` that go through the public API the way workers and scripts
 * use it (issue 12, points 4 and 5):
 *
 *   - submission: the queue is submitted with `createWorkRequests`, batches of `batch` requests one
 *     after the other from one client over HTTP; requests accepted per second, and each batch's time.
 *   - worker cycle: `workers` agent-like clients, each one graphql-ws connection subscribed to its
 *     `assignments` (the agent's own documents, src/agent/operations.ts), acknowledge each pushed
 *     assignment with `startWorkRequest` and report it with `completeWorkRequest` (a result and an
 *     exit code) over that connection, as the agent does (or over HTTP, as agents before 0.2 did:
 *     `over: 'http'`), until the queue is drained. Every call is counted, the
 *     first ones too: cycles per second from the first assignment received to the last completion,
 *     and per operation p50 / p99 (the wait for the next assignment is from a completion answered, or
 *     the subscription opened, to the next push).
 */
import { performance } from 'node:perf_hooks';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { connectionRequests } from '../src/agent/client.js';
import { DOCUMENTS } from '../src/agent/operations.js';

/** How a worker of the cycle sends its acknowledgements and reports. */
export type CycleTransport = 'connection' | 'http';

/** Sends one GraphQL operation over HTTP and returns its data (throws on errors). */
export type Gql = <T = Record<string, any>>(
  url: string,
  query: string,
  variables: Record<string, unknown>,
  token: string,
) => Promise<T>;

const quantile = (sorted: number[], q: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] : NaN;
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

/** A distribution's middle and tail, in milliseconds. */
export interface Spread {
  count: number;
  p50: number;
  p99: number;
  max: number;
}
/** The p50, p99 and max of `xs` (NaN for none). */
export const spread = (xs: number[]): Spread => {
  const s = sorted(xs);
  return { count: s.length, p50: quantile(s, 0.5), p99: quantile(s, 0.99), max: s.at(-1) ?? NaN };
};

/** Runs `fn` over `items` with at most `limit` at a time. */
export async function pool<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i], i);
      }
    }),
  );
  return out;
}

/** The metadata a bench worker reports: it may run the noop worker task. */
export const META = {
  architectures: ['amd64'],
  cpuCount: 4,
  totalPhysicalMemory: 8 * 2 ** 30,
  diskFree: 100 * 2 ** 30,
  executors: ['unshare'],
  tasks: [{ type: 'worker', name: 'noop', version: 1 }],
};

const BATCH_DOCUMENT = `mutation Submit($i: CreateWorkRequestsInput!) {
  createWorkRequests(input: $i) { __typename ... on CreateWorkRequestsPayload { requests { id } } ... on Error { code message } }
}`;

/** What the submission measure found. */
export interface SubmissionResult {
  requests: number;
  batch: number;
  elapsedMs: number;
  perSecond: number;
  batchMs: Spread;
}

/** Submits `total` requests (`request(i)` makes the i-th) in batches of `batch`, one batch after the other. */
export async function submit(
  gql: Gql,
  url: string,
  token: string,
  total: number,
  batch: number,
  request: (i: number) => Record<string, unknown>,
): Promise<SubmissionResult> {
  const times: number[] = [];
  const t0 = performance.now();
  for (let from = 0; from < total; from += batch) {
    const requests = Array.from({ length: Math.min(batch, total - from) }, (_, k) => request(from + k));
    const t = performance.now();
    const d = await gql(url, BATCH_DOCUMENT, { i: { requests } }, token);
    times.push(performance.now() - t);
    if (d.createWorkRequests.__typename !== 'CreateWorkRequestsPayload')
      throw new Error(`createWorkRequests: ${JSON.stringify(d.createWorkRequests).slice(0, 500)}`);
  }
  const elapsedMs = performance.now() - t0;
  return { requests: total, batch, elapsedMs, perSecond: total / (elapsedMs / 1000), batchMs: spread(times) };
}

/** What the worker-cycle measure found. */
export interface CycleResult {
  workers: number;
  /** How the acknowledgements and reports were sent. */
  over: CycleTransport;
  cycles: number;
  /** Assignments taken back (lease expired) before the worker could complete them. */
  lost: number;
  elapsedMs: number;
  perSecond: number;
  connectMs: number;
  wait: Spread;
  start: Spread;
  complete: Spread;
}

/** How often an agent-like worker heartbeats: the agent's default (TAGSCHED_HEARTBEAT_INTERVAL, 30 s). */
const HEARTBEAT_MS = 30_000;

/**
 * One agent-like worker: pushed assignments, acknowledged and completed one at a time (over its
 * connection, or over HTTP), and
 * a heartbeat every 30 s as the agent sends (without it, a run longer than the server's heartbeat
 * timeout, two minutes, has its running work taken back and its workers marked disconnected).
 */
class CycleWorker {
  readonly client: Client;
  private readonly heartbeats: NodeJS.Timeout;
  private readonly queue: string[] = [];
  private busy = false;
  private waitingSince = 0;
  private readonly inFlight = connectionRequests();
  readonly ready: Promise<void>;

  constructor(
    private readonly gql: Gql,
    private readonly url: string,
    private readonly token: string,
    private readonly over: CycleTransport,
    private readonly stats: {
      wait: number[];
      start: number[];
      complete: number[];
      first: number;
      done: number;
      lost: number;
      seen: Set<string>;
      onDone: () => void;
      onError: (e: unknown) => void;
    },
  ) {
    this.client = createClient({
      url: url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      lazy: false,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${token}` },
      onNonLazyError: (err) => stats.onError(err),
    });
    this.client.on('closed', (event) => this.inFlight.cutAll(event));
    this.ready = new Promise((resolve, reject) => {
      this.client.on('connected', () => resolve());
      this.client.on('closed', (e) => reject(new Error(`closed before connecting: ${JSON.stringify(e)}`)));
    });
    this.heartbeats = setInterval(() => {
      this.gql(this.url, DOCUMENTS.heartbeat, { i: { shuttingDown: false } }, this.token).catch((e: unknown) =>
        stats.onError(e),
      );
    }, HEARTBEAT_MS);
    this.waitingSince = performance.now();
    this.client.subscribe<{ assignments: { id: string } }>(
      { query: DOCUMENTS.assignments },
      {
        next: (r) => {
          if (!r.data) return stats.onError(new Error(JSON.stringify(r.errors)));
          const id = String(r.data.assignments.id);
          if (stats.seen.has(id)) return; // one assignment, one run (as the agent)
          stats.seen.add(id);
          this.queue.push(id);
          void this.drain();
        },
        error: (e) => stats.onError(e),
        complete: () => undefined,
      },
    );
  }

  /** Stops its heartbeats and closes its connection. */
  async close(): Promise<void> {
    clearInterval(this.heartbeats);
    await this.client.dispose();
  }

  /** One mutation as the agent sends it: over the connection, or over HTTP. */
  private send(query: string, variables: Record<string, unknown>): Promise<Record<string, any>> {
    if (this.over === 'http') return this.gql(this.url, query, variables, this.token);
    return this.inFlight.send(this.client, query, variables, 600_000);
  }

  private async drain(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      while (this.queue.length) {
        const id = this.queue.shift()!;
        const now = performance.now();
        this.stats.first ||= now;
        this.stats.wait.push(now - this.waitingSince);
        let t = performance.now();
        const started = await this.send(DOCUMENTS.startWorkRequest, { id });
        this.stats.start.push(performance.now() - t);
        let ok = started.startWorkRequest.__typename === 'WorkRequest';
        if (ok) {
          t = performance.now();
          const done = await this.send(DOCUMENTS.completeWorkRequest, { id, r: 'SUCCESS', exitCode: 0, reason: null });
          this.stats.complete.push(performance.now() - t);
          ok = done.completeWorkRequest.__typename === 'WorkRequest';
        }
        this.waitingSince = performance.now();
        if (ok) {
          this.stats.done++;
          this.stats.onDone();
        } else {
          // Taken back meanwhile (its lease expired: the server was too slow to hear the start): it is
          // pending again and will be pushed again, maybe here.
          this.stats.seen.delete(id);
          this.stats.lost++;
        }
      }
    } catch (err) {
      this.stats.onError(err);
    } finally {
      this.busy = false;
    }
  }
}

/**
 * Connects one agent-like client per token and runs until `cycles` requests (the queue already
 * submitted, or being submitted) have been completed through them; the clients are closed at the end.
 */
export async function workerCycle(
  gql: Gql,
  url: string,
  tokens: readonly string[],
  cycles: number,
  log: (m: string) => void,
  over: CycleTransport = 'connection',
): Promise<CycleResult> {
  let finish!: () => void;
  let fail!: (e: unknown) => void;
  const finished = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  const stats = {
    wait: [] as number[],
    start: [] as number[],
    complete: [] as number[],
    first: 0,
    done: 0,
    lost: 0,
    seen: new Set<string>(),
    onDone: () => {
      if (stats.done === cycles) finish();
    },
    onError: (e: unknown) => fail(e),
  };
  const t0 = performance.now();
  const workers: CycleWorker[] = [];
  const progress = setInterval(
    () =>
      log(
        `worker cycle: ${stats.done} of ${cycles} completed${stats.lost ? `, ${stats.lost} taken back before completion` : ''}`,
      ),
    10_000,
  );
  try {
    // Connected a few hundred at a time: a connection must initialise within graphql-ws's 3 s.
    for (let i = 0; i < tokens.length; i += 200) {
      const batch = tokens.slice(i, i + 200).map((token) => new CycleWorker(gql, url, token, over, stats));
      workers.push(...batch);
      await Promise.all(batch.map((w) => w.ready));
    }
    const connectMs = performance.now() - t0;
    log(`worker cycle: ${tokens.length} workers connected in ${Math.round(connectMs)} ms`);
    await finished;
    const elapsedMs = performance.now() - stats.first;
    return {
      workers: tokens.length,
      over,
      cycles,
      lost: stats.lost,
      elapsedMs,
      perSecond: cycles / (elapsedMs / 1000),
      connectMs,
      wait: spread(stats.wait),
      start: spread(stats.start),
      complete: spread(stats.complete),
    };
  } finally {
    clearInterval(progress);
    await Promise.all(workers.map((w) => w.close()));
  }
}
