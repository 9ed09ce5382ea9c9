/**
 * The measurements of the scheduler as it is (src/scheduler), on a loaded database: the next work
 * request of one worker, a full pass, the candidates of 1,000 requests and the provisioning demand
 * through the real GraphQL app. Every operation that assigns commits, as in production, and the
 * rows it assigned are put back to PENDING afterwards, outside the timed part.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import type { App } from '../src/server/app.js';
import type { Config } from '../src/core/config/config.js';
import { ClassCache } from '../src/scheduler/matching/class-cache.js';
import { assignNextWork } from '../src/scheduler/storage/next-work.js';
import { runPass } from '../src/scheduler/storage/pass.js';
import { TaskHistoryCache } from '../src/scheduler/storage/task-history.js';
import { phase } from './progress.js';
import type { Random } from './prng.js';

/** Latencies of repeated calls, in milliseconds. */
export interface Latencies {
  readonly n: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

/** Summarises timings (in milliseconds). */
export function latencies(samples: readonly number[]): Latencies {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => (s.length ? s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] : NaN);
  return { n: s.length, p50: at(0.5), p99: at(0.99), max: s.length ? s[s.length - 1] : NaN };
}

/** The next-work measurement: first calls (nothing cached for the worker yet) and repeated calls. */
export interface NextWorkResult {
  readonly cold: Latencies;
  readonly warm: Latencies;
  /** Share of the calls that got a request. */
  readonly hitRate: number;
  /** The floor under any of it on this machine: a transaction that locks one worker row and commits. */
  readonly floor: Latencies;
}

const RESET_SQL = `update work_request set status = 'PENDING', worker_id = null, assigned_at = null where id = any(?::int[])`;

async function putBack(orm: MikroORM, ids: readonly number[]): Promise<void> {
  if (ids.length)
    await orm.em
      .fork()
      .getConnection()
      .execute(RESET_SQL, [`{${ids.join(',')}}`]);
}

/**
 * `assignNextWork` as `requestWork` runs it (its own transaction, committed), for `calls` random
 * workers, then again for the same workers: the first round pays for computing the worker's
 * eligible classes (ClassCache, per tag signature), the second one is the steady state.
 */
export async function measureNextWork(
  orm: MikroORM,
  config: Pick<Config, 'workers'>,
  workerIds: readonly number[],
  calls: number,
  random: Random,
): Promise<NextWorkResult> {
  const cache = new ClassCache();
  const shuffled = [...workerIds];
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
  }
  const warmup = shuffled.slice(0, Math.min(20, Math.floor(shuffled.length / 10)));
  const chosen = Array.from({ length: calls }, (_, i) => shuffled[(warmup.length + i) % shuffled.length]);
  let hits = 0;
  const one = async (workerId: number): Promise<number> => {
    const started = performance.now();
    const a = await orm.em
      .fork()
      .transactional((tx) => assignNextWork(tx, cache, config.workers, workerId, new Date()));
    const ms = performance.now() - started;
    if (a) {
      hits++;
      await putBack(orm, [a.workRequestId]);
    }
    return ms;
  };
  for (const id of warmup) await one(id); // connections, JIT, the class list
  hits = 0;
  const rounds: number[][] = [];
  for (const label of ['next work: first call per worker', 'next work: repeated calls']) {
    const p = phase(label, calls);
    const samples: number[] = [];
    for (const id of chosen) {
      samples.push(await one(id));
      if (samples.length % 25 === 0) p.update(samples.length);
    }
    const l = latencies(samples);
    p.end(`p50 ${l.p50.toFixed(2)} ms, p99 ${l.p99.toFixed(2)} ms`);
    rounds.push(samples);
  }
  const p = phase('floor: lock one row and commit', calls);
  const floor: number[] = [];
  for (const id of chosen) {
    const started = performance.now();
    await orm.em.fork().transactional((tx) => tx.execute('select id from worker where id = ? for update', [id]));
    floor.push(performance.now() - started);
    if (floor.length % 25 === 0) p.update(floor.length);
  }
  const f = latencies(floor);
  p.end(`p50 ${f.p50.toFixed(2)} ms, p99 ${f.p99.toFixed(2)} ms`);
  return { cold: latencies(rounds[0]), warm: latencies(rounds[1]), hitRate: hits / (2 * calls), floor: f };
}

/** One full pass. */
export interface PassRun {
  readonly ms: number;
  readonly assignments: number;
}

/** The pass measurement: the first pass of a fresh process (nothing cached), then later passes. */
export interface PassResult {
  readonly cold: PassRun;
  readonly warm: PassRun[];
  readonly freeSlots: number;
}

/** `runPass` in its own committed transaction, as the scheduler runs it; the assigned rows are put back after each pass. */
export async function measurePass(
  orm: MikroORM,
  config: Pick<Config, 'workers' | 'statistics'>,
  runs: number,
): Promise<PassResult> {
  const cache = new ClassCache();
  const history = new TaskHistoryCache(config.statistics.heavyTaskSeconds);
  const [{ slots }] = await orm.em
    .fork()
    .getConnection()
    .execute<{ slots: number }[]>(
      `select coalesce(sum(concurrency), 0)::int as slots from worker where type = 'worker'`,
    );
  const results: PassRun[] = [];
  for (let i = 0; i < runs; i++) {
    const p = phase(`full pass ${i + 1}/${runs}${i === 0 ? ' (fresh cache)' : ''}`);
    const started = performance.now();
    const assignments = await orm.em
      .fork()
      .transactional((tx) => runPass(tx, cache, history, config.workers, new Date()));
    const ms = performance.now() - started;
    p.end(`${assignments.length} assignments, ${Math.round((assignments.length * 1000) / ms)}/s`);
    results.push({ ms, assignments: assignments.length });
    await orm.em
      .fork()
      .getConnection()
      .execute(
        `update work_request set status = 'PENDING', worker_id = null, assigned_at = null where status = 'ASSIGNED'`,
      );
  }
  return { cold: results[0], warm: results.slice(1), freeSlots: slots };
}

/** Runs one GraphQL operation as an admin and fails loudly on errors. */
export async function graphql<T>(
  app: App,
  token: string,
  query: string,
  variables: Record<string, unknown> = {},
): Promise<T> {
  const res = await app.yoga.fetch('http://bench/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: T; errors?: unknown[] };
  if (body.errors?.length || !body.data)
    throw new Error(`GraphQL failed: ${JSON.stringify(body.errors).slice(0, 2000)}`);
  return body.data;
}

const CANDIDATES_QUERY = `query($ids: [ID!]!) { candidateWorkers(workRequestIds: $ids) { workRequestId count workerNames(first: 20) } }`;

/** The candidates of many requests, in one GraphQL query. */
export interface CandidatesResult {
  /** The calls after the first. */
  readonly latency: Latencies;
  /** The first call of the process (every worker's shape read, code not compiled yet). */
  readonly firstMs: number;
  readonly requests: number;
  /** Average number of candidate workers per request. */
  readonly averageCandidates: number;
}

/** `candidateWorkers` for the given requests, once and then `runs` times. */
export async function measureCandidates(
  app: App,
  token: string,
  requestIds: readonly number[],
  runs: number,
): Promise<CandidatesResult> {
  const p = phase(`candidates of ${requestIds.length} requests`, runs + 1);
  const samples: number[] = [];
  let average = 0;
  let firstMs = 0;
  // The first call of a process reads every worker's shape and compiles the code; the server's
  // steady state is the calls after it, whose p50 is reported (the first is reported apart).
  for (let i = 0; i <= runs; i++) {
    const started = performance.now();
    const data = await graphql<{ candidateWorkers: { count: number }[] }>(app, token, CANDIDATES_QUERY, {
      ids: requestIds.map(String),
    });
    if (i === 0) firstMs = performance.now() - started;
    else samples.push(performance.now() - started);
    if (data.candidateWorkers.length !== requestIds.length)
      throw new Error(`candidateWorkers answered ${data.candidateWorkers.length} of ${requestIds.length} requests`);
    average = data.candidateWorkers.reduce((s, c) => s + c.count, 0) / requestIds.length;
    p.update(i + 1);
  }
  const latency = latencies(samples);
  p.end(
    `first ${firstMs.toFixed(1)} ms, then p50 ${latency.p50.toFixed(1)} ms, ${average.toFixed(0)} candidates per request`,
  );
  return { latency, firstMs, requests: requestIds.length, averageCandidates: average };
}

const DEMAND_QUERY = `{
  provisioningDemand {
    pendingTotal
    pools { pool { name } pendingRunnable pendingAssigned idleCompatibleSlots workersRequired launch limitedBy stopWorkers { name } }
    unschedulable { count sampleWorkRequestIds requiredTags providedTags nearest { pool workerNames missingOnWorker missingOnTask } }
  }
}`;

/** What the demand answered, to show it is a real answer. */
export interface DemandResult {
  /** The calls after the first. */
  readonly latency: Latencies;
  /** The first call of the process. */
  readonly firstMs: number;
  readonly pendingTotal: number;
  readonly pools: number;
  readonly unschedulableGroups: number;
  readonly unschedulableRequests: number;
  readonly launch: number;
}

/** `provisioningDemand` through GraphQL, `runs` times. */
export async function measureDemand(app: App, token: string, runs: number): Promise<DemandResult> {
  const p = phase('provisioning demand', runs + 1);
  const samples: number[] = [];
  type Answer = {
    provisioningDemand: { pendingTotal: number; pools: { launch: number }[]; unschedulable: { count: number }[] };
  };
  let last: Answer['provisioningDemand'] | null = null;
  let firstMs = 0;
  for (let i = 0; i <= runs; i++) {
    const started = performance.now();
    last = (await graphql<Answer>(app, token, DEMAND_QUERY)).provisioningDemand;
    if (i === 0) firstMs = performance.now() - started;
    else samples.push(performance.now() - started);
    p.update(i + 1);
  }
  const latency = latencies(samples);
  p.end(`first ${firstMs.toFixed(1)} ms, then p50 ${latency.p50.toFixed(1)} ms`);
  return {
    latency,
    firstMs,
    pendingTotal: last?.pendingTotal ?? 0,
    pools: last?.pools.length ?? 0,
    unschedulableGroups: last?.unschedulable.length ?? 0,
    unschedulableRequests: last?.unschedulable.reduce((s, g) => s + g.count, 0) ?? 0,
    launch: last?.pools.reduce((s, x) => s + x.launch, 0) ?? 0,
  };
}

/** One provisioner cycle's decisions, as measured. */
export interface CycleResult {
  /** The calls after the first. */
  readonly latency: Latencies;
  /** The first call of the process. */
  readonly firstMs: number;
  readonly pools: number;
  /** Instances the cycle would launch, and idle workers it would stop. */
  readonly launches: number;
  readonly stops: number;
}

/**
 * One provisioner cycle without its provider calls (src/loops/provisioner/cycle.ts `decide`): the demand
 * of every pool and the launches and stops that follow from it, `runs` times after a first one.
 */
export async function measureProvisionerCycle(app: App, runs: number): Promise<CycleResult> {
  const p = phase('provisioner cycle: demand + decisions', runs + 1);
  const samples: number[] = [];
  let firstMs = 0;
  let last: Awaited<ReturnType<App['provisioner']['decide']>> | null = null;
  for (let i = 0; i <= runs; i++) {
    const started = performance.now();
    last = await app.provisioner.decide();
    if (i === 0) firstMs = performance.now() - started;
    else samples.push(performance.now() - started);
    p.update(i + 1);
  }
  const latency = latencies(samples);
  const launches = last?.plan.launches.reduce((s, l) => s + l.count, 0) ?? 0;
  const stops = last?.plan.stops.length ?? 0;
  p.end(
    `first ${firstMs.toFixed(1)} ms, then p50 ${latency.p50.toFixed(1)} ms; ${launches} launches, ${stops} stops decided`,
  );
  return { latency, firstMs, pools: last?.demand.pools.length ?? 0, launches, stops };
}
