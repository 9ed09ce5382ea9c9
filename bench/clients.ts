/**
 * The server measured from outside, as its clients use it (issue 21, item 6): every operation is one
 * HTTP POST with the document the agent or tagsched-admin sends (src/agent/operations.ts,
 * src/cli/admin/), through the same transport (src/shared/graphql-post.ts), to a real server process
 * with every plugin on (limits, cost analysis, authentication). `npm run bench:ws -- --only clients`
 * runs it on a server and database of its own; `npm run bench` runs it after each size's stages.
 *
 * Setup, not measured: `workers` workers registered with the admin token (`registerWorker`) report
 * metadata that lets them run the noop worker task; `pending` noop requests are submitted with
 * `createWorkRequests` in batches of 1,000 (an API without that mutation: one request is created and
 * copied in SQL, see bench/queue-copy.ts); then WARMUP creates and WARMUP pull cycles are sent and
 * not counted. The documents are today's (CURRENT_API below) unless the caller passes another API's
 * (bench/baselines/api-0.1.0.ts), to measure an older server with the same calls. The server's scheduler is manual (the caller starts it so): with automatic passes the
 * server would give every registered worker a request of the queue before its first pull, and every
 * `requestWork` below would answer null. Measured, in this order:
 *
 *   a. `createWorkRequest` (admin), SEQUENTIAL_CREATES one after the other from one client, then
 *      CONCURRENT_CREATES from `concurrency` clients at once;
 *   b. `requestWork` by random distinct workers, one at a time (SEQUENTIAL_PULLS, at most one per
 *      worker), then each request it assigned started (`startWorkRequest`), one at a time, then each
 *      completed (`completeWorkRequest`, SUCCESS, exit code 0; 0.1.0 takes no exit code), one at a time;
 *   c. CONCURRENT_CYCLES pull cycles (requestWork → start → complete) from `concurrency` clients, each
 *      cycle by a random worker that no other client is using meanwhile;
 *   d. one `requestWork` per worker, for every worker, from `concurrency` clients;
 *   e. the server process's RSS at the end (after a full GC when the bench forked the server; without
 *      one when it measures a server it did not start), and for each of a–d its CPU time (user +
 *      system) divided by the operations sent.
 *
 * Latencies are each call's HTTP round trip (p50 / p99 / max); rates are the operations (or cycles)
 * over the wall-clock time from the first call sent to the last one answered.
 */
import { performance } from 'node:perf_hooks';
import { DOCUMENTS } from '../src/agent/operations.js';
import { CREATE_WORK_REQUEST } from '../src/cli/admin/work.js';
import { REGISTER_WORKER } from '../src/cli/admin/workers.js';
import { postGraphql } from '../src/shared/graphql-post.js';
import { Random } from './prng.js';
import { copyWorkRequest } from './queue-copy.js';
import { META, pool, spread, submit, type Gql, type Spread, type SubmissionResult } from './worker-cycle.js';

/** Calls sent to warm the server's code paths before each measured part, not counted. */
export const WARMUP = 10;
export const SEQUENTIAL_CREATES = 200;
export const CONCURRENT_CREATES = 1000;
export const SEQUENTIAL_PULLS = 300;
export const CONCURRENT_CYCLES = 1000;
export const SUBMIT_BATCH = 1000;

/** The pull of a worker without a WebSocket: requestWork, with the agent's assignment fields. */
export const REQUEST_WORK = `mutation RequestWork {
  requestWork { __typename ... on RequestWorkPayload { workRequest { id taskType taskName taskData } } ... on Error { code message } }
}`;

const NOOP = { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} };
/** The createWorkRequest input of one noop request, every optional field as tagsched-admin's `work create` sends it. */
export const NOOP_INPUT = {
  ...NOOP,
  providedTags: [],
  requiredTags: [],
  priorityBase: null,
  priorityAdjustment: null,
  dependsOn: [],
};

/**
 * What the phase sends, per API version: each operation's document and its variables. Every answer
 * is checked by its __typename (Workspace, WorkerTokenPayload, Worker, WorkRequest, RequestWorkPayload).
 */
export interface ClientsApi {
  /** `current`, or the release whose schema the documents are written for. */
  readonly name: string;
  readonly createWorkspace: string;
  readonly registerWorker: string;
  registerVariables(name: string): Record<string, unknown>;
  /** Its variable: `m`, the metadata. */
  readonly reportWorkerMetadata: string;
  readonly createWorkRequest: string;
  createVariables(): Record<string, unknown>;
  readonly requestWork: string;
  /** Its variable: `id`. */
  readonly startWorkRequest: string;
  readonly completeWorkRequest: string;
  /** A successful completion's variables. */
  completeVariables(id: string): Record<string, unknown>;
  /** Whether the queue can be submitted with `createWorkRequests`; without it, it is copied in SQL. */
  readonly batchCreate: boolean;
}

/** Today's documents: the agent's (src/agent/operations.ts) and tagsched-admin's (`worker register`, `work create`). */
export const CURRENT_API: ClientsApi = {
  name: 'current',
  createWorkspace: `mutation { createWorkspace(input: { name: "${NOOP.workspace}" }) { __typename } }`,
  registerWorker: REGISTER_WORKER,
  registerVariables: (name) => ({
    input: { name, concurrency: null, pool: null, type: null, staticMetadata: null },
    key: null,
  }),
  reportWorkerMetadata: DOCUMENTS.reportWorkerMetadata,
  createWorkRequest: CREATE_WORK_REQUEST,
  createVariables: () => ({ input: NOOP_INPUT, key: null }),
  requestWork: REQUEST_WORK,
  startWorkRequest: DOCUMENTS.startWorkRequest,
  completeWorkRequest: DOCUMENTS.completeWorkRequest,
  completeVariables: (id) => ({ id, r: 'SUCCESS', exitCode: 0, reason: null, statistics: null }),
  batchCreate: true,
};

/** The server under measure: where it listens, and what its process has used. */
export interface MeasuredServer {
  readonly url: string;
  /** CPU time (user + system) the server process has used so far, in milliseconds. */
  cpuMs(): Promise<number>;
  /**
   * The server process's memory, in bytes: after a full GC when `afterGc` (a process this bench forked),
   * else as it is (a process read from outside, whose heap is not known: `heapUsed` null).
   */
  memory(): Promise<{ rss: number; heapUsed: number | null; afterGc: boolean }>;
  /** Called before part a and after part d: e.g. a CPU profile of the measured parts. */
  measuring?(on: boolean): Promise<void>;
}

export interface ClientsOptions {
  workers: number;
  pending: number;
  /** Clients sending at once in the concurrent parts (16). */
  concurrency: number;
  seed: number;
  /** The calls of a–c are these constants times `scale` (1; `npm run bench -- --quick` gives 0.2). */
  scale?: number;
  /** The documents to send (CURRENT_API by default). */
  api?: ClientsApi;
  /** The server's database, for an API without createWorkRequests: its queue is copied there in SQL. */
  databaseUrl?: string;
}

/** One operation sent `count` times by `concurrency` clients. */
export interface OperationResult {
  count: number;
  concurrency: number;
  elapsedMs: number;
  perSecond: number;
  latency: Spread;
  /** The server process's CPU time over the part, per call. */
  cpuMsPerOp: number;
}

/** Everything the client phase measured; plain data (JSON). */
export interface ClientsResult {
  /** The API whose documents were sent (ClientsApi.name). */
  api: string;
  workers: number;
  pending: number;
  concurrency: number;
  /** `queue`: how the pending requests were made: createWorkRequests batches, or one create copied in SQL. */
  setup: { registerMs: number; submission: SubmissionResult; queue: 'batch' | 'copy' };
  /** a. */
  create: { sequential: OperationResult; concurrent: OperationResult };
  /** b. One at a time; `empty` counts requestWork answers without work. */
  pull: { requestWork: OperationResult; start: OperationResult; complete: OperationResult; empty: number };
  /** c. `attempts` pulls, of which `cycles` got work and were started and completed. */
  cycle: {
    attempts: number;
    cycles: number;
    concurrency: number;
    elapsedMs: number;
    perSecond: number;
    requestWork: Spread;
    start: Spread;
    complete: Spread;
    cpuMsPerCycle: number;
  };
  /** d. */
  everyWorker: OperationResult & { empty: number };
  /** e. At the end: after a full GC when `afterGc` (see MeasuredServer.memory). */
  server: { rssBytes: number; heapUsedBytes: number | null; afterGc: boolean };
  elapsedMs: number;
}

/** One POST as the agent and tagsched-admin send it; the data, or a thrown error. */
const gql: Gql = async <T>(
  url: string,
  query: string,
  variables: Record<string, unknown>,
  token: string,
): Promise<T> => {
  const { status, body } = await postGraphql({ url, token, query, variables, timeoutMs: 120_000 });
  const answer = body as { data?: T; errors?: unknown[] } | null;
  if (status !== 200 || !answer?.data || answer.errors?.length)
    throw new Error(`HTTP ${status}: ${JSON.stringify(body)?.slice(0, 500)}`);
  return answer.data;
};
const post = (url: string, token: string, query: string, variables: Record<string, unknown> = {}) =>
  gql(url, query, variables, token);

/** The field's answer when it is `typename`; a typed error (or anything else) is thrown. */
function answerOf(data: Record<string, any>, field: string, typename: string): Record<string, any> {
  const node = data[field];
  if (node?.__typename !== typename) throw new Error(`${field}: ${JSON.stringify(node)?.slice(0, 500)}`);
  return node;
}

/** Runs the phase (see the header) against a server whose scheduler is manual. */
export async function measureClients(
  server: MeasuredServer,
  admin: string,
  o: ClientsOptions,
  log: (m: string) => void,
): Promise<ClientsResult> {
  if (o.workers < o.concurrency)
    throw new Error(
      `the client phase needs at least as many workers (${o.workers}) as clients at once (${o.concurrency})`,
    );
  const { url } = server;
  const api = o.api ?? CURRENT_API;
  if (!api.batchCreate && !o.databaseUrl)
    throw new Error(
      `the ${api.name} API has no createWorkRequests: its queue is copied in SQL, which needs the server's database URL`,
    );
  const scaled = (n: number) => Math.max(1, Math.round(n * (o.scale ?? 1)));
  const t0 = performance.now();
  const random = new Random(o.seed);
  answerOf(await post(url, admin, api.createWorkspace), 'createWorkspace', 'Workspace');

  const t = performance.now();
  const names = Array.from({ length: o.workers }, (_, i) => `client-${String(i).padStart(6, '0')}`);
  const tokens = await pool(names, o.concurrency, async (name) => {
    const { token } = answerOf(
      await post(url, admin, api.registerWorker, api.registerVariables(name)),
      'registerWorker',
      'WorkerTokenPayload',
    );
    answerOf(await post(url, token, api.reportWorkerMetadata, { m: META }), 'reportWorkerMetadata', 'Worker');
    return token as string;
  });
  const registerMs = performance.now() - t;
  log(`clients: ${o.workers.toLocaleString('en-US')} workers registered and reported in ${Math.round(registerMs)} ms`);

  const create = async () =>
    answerOf(await post(url, admin, api.createWorkRequest, api.createVariables()), 'createWorkRequest', 'WorkRequest');
  let submission: SubmissionResult;
  if (api.batchCreate) {
    submission = await submit(gql, url, admin, o.pending, SUBMIT_BATCH, () => NOOP);
    log(
      `clients: ${o.pending.toLocaleString('en-US')} pending requests submitted in ${Math.round(submission.elapsedMs)} ms`,
    );
  } else {
    // One request made by the server, then copied row for row: the same task, class and tags.
    const begin = performance.now();
    const { id } = await create();
    if (o.pending > 1) await copyWorkRequest(o.databaseUrl!, Number(id), o.pending - 1);
    const elapsedMs = performance.now() - begin;
    submission = {
      requests: o.pending,
      batch: 0,
      elapsedMs,
      perSecond: o.pending / (elapsedMs / 1000),
      batchMs: spread([]),
    };
    log(
      `clients: 1 request created and copied ${(o.pending - 1).toLocaleString('en-US')} times in SQL in ${Math.round(elapsedMs)} ms`,
    );
  }

  /** The id requestWork assigned to the worker, or null. */
  const requestWork = async (token: string): Promise<string | null> => {
    const { workRequest } = answerOf(await post(url, token, api.requestWork), 'requestWork', 'RequestWorkPayload');
    return workRequest ? String(workRequest.id) : null;
  };
  const start = async (token: string, id: string) =>
    answerOf(await post(url, token, api.startWorkRequest, { id }), 'startWorkRequest', 'WorkRequest');
  const complete = async (token: string, id: string) =>
    answerOf(
      await post(url, token, api.completeWorkRequest, api.completeVariables(id)),
      'completeWorkRequest',
      'WorkRequest',
    );

  /** Sends `count` calls of `op` from `concurrency` clients: each call's round trip, the rate, the server's CPU. */
  const measure = async <T>(
    count: number,
    concurrency: number,
    op: (i: number) => Promise<T>,
  ): Promise<{ result: OperationResult; values: T[] }> => {
    const times: number[] = [];
    const cpu0 = await server.cpuMs();
    const begin = performance.now();
    const values = await pool(
      Array.from({ length: count }, (_, i) => i),
      concurrency,
      async (i) => {
        const at = performance.now();
        const value = await op(i);
        times.push(performance.now() - at);
        return value;
      },
    );
    const elapsedMs = performance.now() - begin;
    const cpuMs = (await server.cpuMs()) - cpu0;
    return {
      result: {
        count,
        concurrency,
        elapsedMs,
        perSecond: count / (elapsedMs / 1000),
        latency: spread(times),
        cpuMsPerOp: cpuMs / count,
      },
      values,
    };
  };

  // Warm-up: creates, and pull cycles by the first workers (they are idle again after).
  for (let i = 0; i < WARMUP; i++) await create();
  for (const token of tokens.slice(0, WARMUP)) {
    const id = await requestWork(token);
    if (id) await complete(token, (await start(token, id)).id);
  }

  // a.
  await server.measuring?.(true);
  const createSequential = (await measure(scaled(SEQUENTIAL_CREATES), 1, create)).result;
  const createConcurrent = (await measure(scaled(CONCURRENT_CREATES), o.concurrency, create)).result;
  log(
    `clients: createWorkRequest p50 ${createSequential.latency.p50.toFixed(1)} ms alone, ${Math.round(createConcurrent.perSecond)}/s from ${o.concurrency} clients`,
  );

  // b. Distinct workers, so that none is busy with the request it pulled before.
  const shuffled = shuffle(tokens, random);
  const pullers = shuffled.slice(0, Math.min(scaled(SEQUENTIAL_PULLS), tokens.length));
  const pulled = await measure(pullers.length, 1, (i) => requestWork(pullers[i]));
  const assigned = pulled.values.flatMap((id, i) => (id ? [{ token: pullers[i], id }] : []));
  const started = await measure(assigned.length, 1, (i) => start(assigned[i].token, assigned[i].id));
  const completed = await measure(assigned.length, 1, (i) => complete(assigned[i].token, assigned[i].id));
  const pull = {
    requestWork: pulled.result,
    start: started.result,
    complete: completed.result,
    empty: pullers.length - assigned.length,
  };
  log(
    `clients: requestWork one at a time p50 ${pull.requestWork.latency.p50.toFixed(1)} ms (${pull.empty} without work)`,
  );

  // c. A worker is taken out of the idle ones for its cycle and put back after it.
  const idle = [...tokens];
  const cycleTimes = { requestWork: [] as number[], start: [] as number[], complete: [] as number[] };
  let cycles = 0;
  const timed = async <T>(into: number[], fn: () => Promise<T>): Promise<T> => {
    const at = performance.now();
    const value = await fn();
    into.push(performance.now() - at);
    return value;
  };
  const cpu0 = await server.cpuMs();
  const begin = performance.now();
  await pool(
    Array.from({ length: scaled(CONCURRENT_CYCLES) }, (_, i) => i),
    o.concurrency,
    async () => {
      const k = Math.floor(random.next() * idle.length);
      const token = idle[k];
      idle[k] = idle[idle.length - 1];
      idle.pop();
      const id = await timed(cycleTimes.requestWork, () => requestWork(token));
      if (id) {
        await timed(cycleTimes.start, () => start(token, id));
        await timed(cycleTimes.complete, () => complete(token, id));
        cycles++;
      }
      idle.push(token);
    },
  );
  const cycleElapsed = performance.now() - begin;
  const cycle = {
    attempts: scaled(CONCURRENT_CYCLES),
    cycles,
    concurrency: o.concurrency,
    elapsedMs: cycleElapsed,
    perSecond: cycles / (cycleElapsed / 1000),
    requestWork: spread(cycleTimes.requestWork),
    start: spread(cycleTimes.start),
    complete: spread(cycleTimes.complete),
    cpuMsPerCycle: ((await server.cpuMs()) - cpu0) / Math.max(1, cycles),
  };
  log(`clients: ${cycles} cycles from ${o.concurrency} clients, ${Math.round(cycle.perSecond)}/s`);

  // d.
  const every = await measure(tokens.length, o.concurrency, (i) => requestWork(tokens[i]));
  const everyWorker = { ...every.result, empty: every.values.filter((id) => id === null).length };
  log(
    `clients: one requestWork per worker, ${Math.round(everyWorker.perSecond)}/s (${everyWorker.empty} without work)`,
  );

  // e.
  await server.measuring?.(false);
  const memory = await server.memory();
  return {
    api: api.name,
    workers: o.workers,
    pending: o.pending,
    concurrency: o.concurrency,
    setup: { registerMs, submission, queue: api.batchCreate ? 'batch' : 'copy' },
    create: { sequential: createSequential, concurrent: createConcurrent },
    pull,
    cycle,
    everyWorker,
    server: { rssBytes: memory.rss, heapUsedBytes: memory.heapUsed, afterGc: memory.afterGc },
    elapsedMs: performance.now() - t0,
  };
}

/** A seeded Fisher–Yates shuffle of a copy. */
function shuffle<T>(items: readonly T[], random: Random): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random.next() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
