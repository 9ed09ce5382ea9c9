/**
 * The bulk scheduler agrees with the reference predicate `matchTags` of the tag engine: on random
 * tag universes, workers, pools and work requests, every bulk answer (class decisions, candidates,
 * the next request of each worker, a full pass, the provisioning demand) equals what a per-pair walk
 * with `matchTags`, the availability rule of docs/design.md: workers (fresh reports, quarantine), the release
 * backoffs of docs/design.md: placement quality and its placement preference (heavy work by size class or task history) say. Most cases run on the pure layer;
 * a few hundred on the real database, through the scheduler functions and GraphQL.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { WorkerPool } from '../../src/storage/entities/worker-pool.js';
import { UNAVAILABLE, type UnavailableReason } from '../../src/scheduler/rules/availability.js';
import { candidatesOf, loadTaskTags } from '../../src/scheduler/matching/candidates.js';
import { classFits } from '../../src/scheduler/rules/fit.js';
import { tagName } from '../../src/core/tags/syntax.js';
import { computeDemand } from '../../src/scheduler/storage/demand.js';
import { DIAGNOSIS_STATES, diagnose, PREFERRED_SHOWN } from '../../src/scheduler/matching/diagnosis.js';
import { assignNextWork } from '../../src/scheduler/storage/next-work.js';
import { taskKey, type TaskHistory } from '../../src/scheduler/rules/heavy-work.js';
import type { PassOptions } from '../../src/scheduler/matching/pass-matching.js';
import { runPass } from '../../src/scheduler/storage/pass.js';
import type { PoolTemplate } from '../../src/scheduler/matching/pool-template.js';
import { poolTagInput } from '../../src/scheduler/storage/pool-templates.js';
import type { WorkerState } from '../../src/scheduler/matching/worker-state.js';
import { loadWorkerStates } from '../../src/scheduler/storage/worker-snapshot.js';
import { TaskHistoryCache } from '../../src/scheduler/storage/task-history.js';
import { WorkerSnapshot } from '../../src/scheduler/storage/worker-snapshot.js';
import { matchTags } from '../../src/core/tags/match.js';
import { DEFAULT_SIZE_THRESHOLDS } from '../../src/core/tags/size-class.js';
import { computePoolTemplateTags } from '../../src/core/tags/worker-tags.js';
import { useTestApp } from '../helpers/app.js';
import {
  inRollback,
  resetScheduling,
  seedScheduling,
  type PoolRow,
  type RequestRow,
  type WorkerRow,
} from '../helpers/scheduler-fixtures.js';

const PURE_RUNS = 2000;
const DB_RUNS = 200;

// ---- The world generator: a small tag universe per case, so that matches and misses both happen often.

const DOMAIN_TAGS = [
  'worker:build-arch:amd64',
  'worker:build-arch:arm64',
  'worker:cap:sbuild',
  'worker:executor:unshare',
  'worker:class:large',
  'task:workspace:debian:main',
  'task:workspace:debian:security',
  'task:source-package:linux',
];
const VALUED_NAMES = ['worker:memory-gib', 'worker:cpu-count', 'task:weight'];
const NUMBERS = [0, 1, 2, 2.5, 4, 8, 16];
const WORKER_TYPES = ['worker', 'server', 'signing', 'not-assignable'] as const;

const weighted = (pTrue: number) => fc.integer({ min: 1, max: 100 }).map((n) => n <= pTrue * 100);
const uniq = (tags: readonly string[]) => [...new Set(tags)];

interface Universe {
  plain: string[];
  valued: string[];
}

const universeArb: fc.Arbitrary<Universe> = fc
  .record({
    plain: fc.uniqueArray(fc.oneof(fc.constantFrom(...DOMAIN_TAGS), fc.stringMatching(/^[a-z]{1,2}:[a-z0-9]{1,2}$/)), {
      minLength: 1,
      maxLength: 6,
    }),
    valued: fc.uniqueArray(fc.oneof(fc.constantFrom(...VALUED_NAMES), fc.stringMatching(/^v:[a-z]{1,2}$/)), {
      minLength: 1,
      maxLength: 3,
    }),
    // A plain tag spelled like a valued name: `NAME` never matches `NAME=V` (src/core/tags/match.ts).
    bareValued: fc.boolean(),
  })
  .map(({ plain, valued, bareValued }) => ({ plain: bareValued ? uniq([...plain, valued[0]]) : plain, valued }));

const valuesArb = (u: Universe, suffix: '=' | '>=', maxLength: number) =>
  fc
    .array(fc.tuple(fc.constantFrom(...u.valued), fc.constantFrom(...NUMBERS)), { maxLength })
    .map((pairs) => pairs.map(([n, v]) => `${n}${suffix}${v}`));

const providedArb = (u: Universe, maxPlain: number, maxValues: number) =>
  fc
    .tuple(fc.subarray(u.plain, { maxLength: Math.min(maxPlain, u.plain.length) }), valuesArb(u, '=', maxValues))
    .map(([plain, values]) => uniq([...plain, ...values]));

const requiredArb = (u: Universe, maxPlain: number) =>
  fc
    .tuple(fc.subarray(u.plain, { maxLength: Math.min(maxPlain, u.plain.length) }), valuesArb(u, '>=', 1))
    .map(([plain, minima]) => uniq([...plain, ...minima]));

const typeArb = <T extends string | null>(extra: readonly T[]) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.constant('worker' as const) },
    { weight: 1, arbitrary: fc.constantFrom(...WORKER_TYPES.slice(1), ...extra) },
  );

const workerArb = (u: Universe) =>
  fc.record({
    type: typeArb([]),
    providedTags: providedArb(u, u.plain.length, 3),
    requiredTags: fc.oneof(
      { weight: 3, arbitrary: fc.constant<string[]>([]) },
      { weight: 1, arbitrary: requiredArb(u, 2) },
    ),
    concurrency: fc.integer({ min: 1, max: 3 }),
    active: fc.oneof(
      { weight: 3, arbitrary: fc.constant(0) },
      { weight: 2, arbitrary: fc.integer({ min: 1, max: 3 }) },
    ),
    enabled: weighted(0.85),
    draining: weighted(0.15),
    connection: fc.constantFrom(
      'connected',
      'connected',
      'connected',
      'connected',
      'connected',
      'disconnected',
      'stale',
      'unreported',
    ),
    terminated: weighted(0.08),
    quarantined: weighted(0.08),
    // A worker of the world's first pool, when it has one (its tags are its own here, not the pool's).
    pooled: weighted(0.3),
    // Its size (docs/design.md: placement quality: heavy work on the largest, other work on the smallest that fits).
    cpus: fc.constantFrom(undefined, 2, 8, 32),
    memoryGib: fc.constantFrom(undefined, 4, 64),
    large: weighted(0.3),
  });

const requestArb = (u: Universe) =>
  fc.record({
    providedTags: providedArb(u, 4, 1),
    requiredTags: requiredArb(u, 2),
    // Mostly ordinary worker tasks; some for server, signing or nobody (internal), some with no type at all.
    type: typeArb([null]),
    // What the task is: mostly a worker task; sometimes one the server runs itself, whatever its tags.
    taskType: fc.constantFrom('worker', 'worker', 'worker', 'worker', 'worker', 'worker', 'internal', 'workflow'),
    priorityBase: fc.integer({ min: -1, max: 2 }),
    priorityAdjustment: fc.constantFrom(0, 0, 0, -1, 1),
    createdAtSeconds: fc.integer({ min: 0, max: 3 }),
    // Its place among workspaces at equal priority (fair share), independent of its age here so that both decide.
    fairKeySeconds: fc.integer({ min: 0, max: 2 }),
    heavy: weighted(0.25),
    // Its task's average run over the last 30 days (none, short, or above HEAVY_SECONDS: heavy work by history).
    historySeconds: fc.constantFrom(undefined, undefined, 60, 7200),
    // A long run 40 days ago, which must not count.
    oldHistory: weighted(0.15),
  });

const poolArb = (u: Universe) =>
  fc.record({
    providedTags: providedArb(u, u.plain.length, 2),
    requiredTags: fc.oneof(
      { weight: 3, arbitrary: fc.constant<string[]>([]) },
      { weight: 1, arbitrary: requiredArb(u, 1) },
    ),
    memoryGib: fc.constantFrom(undefined, 4, 16),
    enabled: weighted(0.8),
  });

const worldArb = universeArb.chain((u) =>
  fc.record({
    workers: fc.array(workerArb(u), { minLength: 0, maxLength: 8 }),
    requests: fc.array(requestArb(u), { minLength: 1, maxLength: 12 }),
    pools: fc.array(poolArb(u), { maxLength: 3 }),
    registerFirst: fc.boolean(),
    calls: fc.array(fc.nat(), { maxLength: 5 }),
    // Releases in force: (request, worker) pairs, by position; the request is not offered to that worker.
    backoffs: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 3 }),
  }),
);
type World = typeof worldArb extends fc.Arbitrary<infer W> ? W : never;

/** The rows of a generated world: named, with the type tags their type implies. */
function rowsOf(world: World): { workers: WorkerRow[]; requests: RequestRow[]; pools: PoolRow[] } {
  return {
    workers: world.workers.map(({ pooled, cpus, memoryGib, large, ...w }, i) => ({
      ...w,
      pool: pooled && world.pools.length ? 'p0' : null,
      name: `w${String(i).padStart(2, '0')}`,
      providedTags: uniq([
        ...w.providedTags.filter((t) => !t.startsWith('worker:cpu-count=') && !t.startsWith('worker:memory-gib=')),
        `worker:type:${w.type}`,
        ...(cpus === undefined ? [] : [`worker:cpu-count=${cpus}`]),
        ...(memoryGib === undefined ? [] : [`worker:memory-gib=${memoryGib}`]),
        ...(large ? ['worker:class:large'] : []),
      ]),
    })),
    requests: world.requests.map(({ heavy, historySeconds: _h, oldHistory: _o, ...r }, i) => ({
      ...r,
      key: `r${String(i).padStart(2, '0')}`,
      requiredTags: uniq([
        ...r.requiredTags,
        ...(r.type ? [`worker:type:${r.type}`] : []),
        ...(heavy ? ['worker:class:large'] : []),
      ]),
    })),
    pools: world.pools.map((p, i) => ({
      name: `p${i}`,
      providedTags: p.providedTags,
      requiredTags: p.requiredTags,
      specifications: p.memoryGib === undefined ? {} : { memoryGib: p.memoryGib },
      enabled: p.enabled,
    })),
  };
}

// ---- The reference: docs/design.md: tags and provenance pair by pair, with matchTags.

type Tagged = { readonly providedTags: readonly string[]; readonly requiredTags: readonly string[] };

const matches = (task: Tagged, worker: Tagged & { readonly type: string }) =>
  worker.type !== 'not-assignable' &&
  matchTags(
    { provided: task.providedTags, required: task.requiredTags },
    { provided: worker.providedTags, required: worker.requiredTags },
  ).ok;

function refUnavailable(w: WorkerRow, heartbeat = false): UnavailableReason | null {
  if (w.terminated) return UNAVAILABLE.INACTIVE;
  if (!w.enabled) return UNAVAILABLE.DISABLED;
  if (w.quarantined) return UNAVAILABLE.QUARANTINED;
  if (!heartbeat && w.connection === 'disconnected') return UNAVAILABLE.DISCONNECTED;
  // A heartbeat (a pull) connects a worker; only a report of its metadata makes it fresh.
  if (w.connection === 'stale' || w.connection === 'unreported') return UNAVAILABLE.STALE;
  if (w.draining) return UNAVAILABLE.DRAINING;
  if (w.type === 'not-assignable') return UNAVAILABLE.NOT_ASSIGNABLE;
  return null;
}
const refFree = (w: WorkerRow, heartbeat = false) =>
  refUnavailable(w, heartbeat) ? 0 : Math.max(0, w.concurrency - w.active);

interface QueuedRequest extends RequestRow {
  readonly id: number;
}
const queueOrder = (a: QueuedRequest, b: QueuedRequest) =>
  b.priorityBase + b.priorityAdjustment - (a.priorityBase + a.priorityAdjustment) ||
  (a.fairKeySeconds ?? a.createdAtSeconds) - (b.fairKeySeconds ?? b.createdAtSeconds) ||
  a.createdAtSeconds - b.createdAtSeconds ||
  a.id - b.id;

/** The heavy-work threshold of these worlds (TAGSCHED_HEAVY_TASK_SECONDS), in seconds. */
const HEAVY_SECONDS = 3600;
/** The task history of a world: each request is its own task (`worker`, its key), with its recent average. */
const historyOf = (world: World): TaskHistory => ({
  thresholdSeconds: HEAVY_SECONDS,
  averageSeconds: new Map(
    world.requests.flatMap((r, i) =>
      r.historySeconds === undefined
        ? []
        : [[taskKey('worker', `r${String(i).padStart(2, '0')}`), r.historySeconds] as const],
    ),
  ),
});
/** docs/design.md: placement quality: heavy work requires worker:class:large, or its task's recent average run reaches the threshold. */
const refHeavy = (r: RequestRow, history: TaskHistory) =>
  r.requiredTags.includes('worker:class:large') ||
  (history.averageSeconds.get(taskKey('worker', r.key)) ?? 0) >= history.thresholdSeconds;

/** A worker's CPUs and memory, from its provided tags (0 when absent). */
const refSize = (w: { readonly providedTags: readonly string[] }) => {
  const value = (name: string) =>
    Number(w.providedTags.find((t) => t.startsWith(`${name}=`))?.slice(name.length + 1) ?? 0);
  return [value('worker:cpu-count'), value('worker:memory-gib')];
};
/** A worker as the preference reference sees it. */
interface Placed {
  readonly pooled: boolean;
  readonly providedTags: readonly string[];
}
const placed = (w: WorkerRow): Placed => ({ pooled: !!w.pool, providedTags: w.providedTags });

/**
 * Whether placement must offer a request to worker x before worker w (docs/design.md: placement quality): static workers
 * before pool workers; then, among equals, the larger for heavy work (refHeavy) and the smaller for
 * the rest.
 */
function refPrefers(heavy: boolean, x: Placed, w: Placed): boolean {
  if (x.pooled !== w.pooled) return !x.pooled;
  const [xs, ws] = [refSize(x), refSize(w)];
  const bySize = xs[0] - ws[0] || xs[1] - ws[1];
  return heavy ? bySize > 0 : bySize < 0;
}

/** Pairs "request id:worker name" that a release backoff keeps apart (docs/design.md: placement quality). */
type BackedOffPairs = ReadonlySet<string>;
const offered = (r: QueuedRequest, w: WorkerRow, backedOff: BackedOffPairs) =>
  matches(r, w) && !backedOff.has(`${r.id}:${w.name}`);

/** The next request of a worker: the first pending one it matches and is not backed off from, in queue order, if it may take one now. */
function refNext(
  w: WorkerRow,
  pending: readonly QueuedRequest[],
  backedOff: BackedOffPairs,
  heartbeat = false,
): QueuedRequest | null {
  if (refFree(w, heartbeat) === 0) return null;
  return [...pending].sort(queueOrder).find((r) => offered(r, w, backedOff)) ?? null;
}

const templateOf = (p: PoolRow) => ({
  type: 'worker',
  ...computePoolTemplateTags(poolTagInput(p), DEFAULT_SIZE_THRESHOLDS),
});
const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** The state of a worker as the bulk functions see it, built from the reference availability. */
function stateOf(w: WorkerRow, id: number): WorkerState {
  const unavailable = refUnavailable(w);
  return {
    id,
    name: w.name,
    type: w.type,
    poolId: w.pool ? 1 : null,
    providedTags: w.providedTags,
    requiredTags: w.requiredTags,
    concurrency: w.concurrency,
    active: w.active,
    unavailable,
    free: refFree(w),
    idleSince: null,
  };
}

// ---- The pure layer: thousands of cases.

describe('the bulk matcher against matchTags, in memory', () => {
  it('classFits on a class of significant provided tags decides exactly as matchTags on the full tags', () => {
    fc.assert(
      fc.property(
        worldArb,
        fc.array(fc.stringMatching(/^[a-z]{1,2}:[a-z0-9]{1,2}$/), { maxLength: 3 }),
        (world, extraSignificant) => {
          const { workers, requests, pools } = rowsOf(world);
          const templates = pools.map(templateOf);
          // Significant: every name a worker or a pool requires (as registerSignificantTags records), plus unrelated names.
          const significant = new Set(
            [...workers, ...templates].flatMap((w) => w.requiredTags.map(tagName)).concat(extraSignificant),
          );
          const pairs = requests.flatMap((r) => [...workers, ...templates].map((w) => ({ r, w })));
          const decided = pairs.map(({ r, w }) =>
            classFits(
              {
                id: 1,
                requiredTags: r.requiredTags,
                significantProvidedTags: r.providedTags.filter((tag) => significant.has(tagName(tag))),
              },
              w,
            ),
          );
          expect(decided).toEqual(pairs.map(({ r, w }) => matches(r, w)));
        },
      ),
      { numRuns: PURE_RUNS },
    );
  });

  it('candidatesOf returns, per request, the workers matchTags accepts (available now, or all)', () => {
    // One snapshot for all the runs, as in a server process: its keys grow with every run's requirements.
    const snapshot = new WorkerSnapshot();
    fc.assert(
      fc.property(worldArb, fc.boolean(), (world, availableOnly) => {
        const { workers, requests } = rowsOf(world);
        const states = workers.filter((w) => !w.terminated).map((w, i) => stateOf(w, i + 1));
        const tasks = requests.map((r, i) => ({
          id: i + 1,
          providedTags: r.providedTags,
          requiredTags: r.requiredTags,
        }));
        const expected = tasks.map((task) =>
          states
            .filter((s) => matches(task, s) && (!availableOnly || s.free > 0))
            .sort(byName)
            .map((s) => s.name),
        );
        const found = candidatesOf(tasks, states, availableOnly);
        expect(tasks.map((task) => (found.get(task.id) ?? []).map((s) => s.name))).toEqual(expected);
        const keyed = candidatesOf(tasks, states, availableOnly, (required) => snapshot.keying(required));
        expect(tasks.map((task) => (keyed.get(task.id) ?? []).map((s) => s.name))).toEqual(expected);
      }),
      { numRuns: PURE_RUNS },
    );
  });

  it('diagnose names the state the reference predicts, with the matching workers and pools, and places by the preference', () => {
    fc.assert(
      fc.property(worldArb, (world) => {
        const { workers, requests, pools } = rowsOf(world);
        const history = historyOf(world);
        const placedState = (s: WorkerState): Placed => ({ pooled: s.poolId !== null, providedTags: s.providedTags });
        const states = workers.filter((w) => !w.terminated).map((w, i) => stateOf(w, i + 1));
        const templates: PoolTemplate[] = pools
          .filter((p) => p.enabled)
          .map((p) => ({
            ...templateOf(p),
            type: 'worker',
            pool: { name: p.name } as Pick<WorkerPool, 'name'> as WorkerPool,
          }));
        const actual = [];
        const expected = [];
        for (const [i, r] of requests.entries()) {
          const taskType = world.requests[i].taskType;
          const d = diagnose(
            {
              id: i + 1,
              status: 'PENDING',
              taskType,
              taskName: r.key,
              providedTags: r.providedTags,
              requiredTags: r.requiredTags,
            },
            states,
            templates,
            [],
            {
              history,
              eligibleCount: () => 0,
            },
          );
          // An orchestrated task (internal, workflow) is never matched: no worker or pool is meant to run it.
          const orchestrated = taskType !== 'worker';
          const matching = orchestrated ? [] : states.filter((s) => matches(r, s));
          // Placement: heavy by size class or history, and the free workers named in an order the reference allows.
          if (orchestrated) expect(d.placement).toBeNull();
          else {
            const heavy = refHeavy(r, history);
            const free = matching.filter((s) => s.free > 0);
            const named = d.placement!.preferredWorkers.map((n) => free.find((s) => s.name === n)!);
            expect(d.placement).toMatchObject({
              heavy,
              heavyReason: r.requiredTags.includes('worker:class:large') ? 'REQUIRES_LARGE' : heavy ? 'HISTORY' : null,
              averageSeconds: world.requests[i].historySeconds ?? null,
            });
            expect(named.every(Boolean), 'only free matching workers are named').toBe(true);
            expect(named.length).toBe(Math.min(PREFERRED_SHOWN, free.length));
            if (named.length)
              expect(
                free.filter((x) => refPrefers(heavy, placedState(x), placedState(named[0]))).map((x) => x.name),
              ).toEqual([]);
            for (let k = 1; k < named.length; k++)
              expect(refPrefers(heavy, placedState(named[k]), placedState(named[k - 1]))).toBe(false);
            expect(d.placement!.decidedBy === null).toBe(free.length < 2);
          }
          const matchingPools = orchestrated ? [] : templates.filter((p) => matches(r, p)).map((p) => p.pool.name);
          const state = orchestrated
            ? DIAGNOSIS_STATES.ORCHESTRATED
            : matching.some((s) => s.free > 0)
              ? DIAGNOSIS_STATES.READY
              : matching.some((s) => !s.unavailable)
                ? DIAGNOSIS_STATES.WAITING_FOR_CAPACITY
                : matching.length
                  ? DIAGNOSIS_STATES.WAITING_FOR_WORKERS
                  : matchingPools.length
                    ? DIAGNOSIS_STATES.WAITING_FOR_PROVISIONING
                    : DIAGNOSIS_STATES.UNSCHEDULABLE;
          actual.push({
            state: d.state,
            matchingWorkers: d.matchingWorkers,
            availableWorkers: d.availableWorkers,
            matchingPools: d.matchingPools,
            mismatches: d.mismatches.map((m) => [m.missingOnWorker, m.missingOnTask]),
          });
          // Every group that does not match says why, in matchTags' own words.
          const mismatched = d.mismatches.map((m) =>
            m.pool ? templates.find((p) => p.pool.name === m.pool)! : states.find((s) => s.name === m.workerNames[0])!,
          );
          const why = mismatched.map((o) =>
            matchTags(
              { provided: r.providedTags, required: r.requiredTags },
              { provided: o.providedTags, required: o.requiredTags },
            ),
          );
          expected.push({
            state,
            matchingWorkers: matching.length,
            availableWorkers: matching.filter((s) => s.free > 0).length,
            matchingPools,
            mismatches: why.map((m) => [m.missingOnWorker, m.missingOnTask]),
          });
          // And the groups it lists are exactly those that do not match.
          actual.push(d.mismatches.reduce((n, m) => n + Math.max(m.workerCount, m.pool ? 1 : 0), 0));
          expected.push(
            orchestrated
              ? 0
              : states.filter(
                  (s) =>
                    !matchTags(
                      { provided: r.providedTags, required: r.requiredTags },
                      { provided: s.providedTags, required: s.requiredTags },
                    ).ok,
                ).length + templates.filter((p) => !matches(r, p)).length,
          );
        }
        expect(actual).toEqual(expected);
      }),
      { numRuns: PURE_RUNS },
    );
  });
});

// ---- The database layer: the same worlds written as rows, asked through the scheduler and GraphQL.

const t = useTestApp();

const CANDIDATES = `query($ids: [ID!]!) {
  available: candidateWorkers(workRequestIds: $ids, availableOnly: true) { workRequestId workerNames }
  all: candidateWorkers(workRequestIds: $ids, availableOnly: false) { workRequestId workerNames }
}`;
const REQUEST_WORK = `mutation { requestWork { __typename ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;

async function checkWorld(world: World): Promise<void> {
  const rows = rowsOf(world);
  await resetScheduling(t);
  const seeded = await seedScheduling(t, rows, world.registerFirst ? 'register-first' : 'classify-first');
  const workers = rows.workers.map((w) => ({ ...w, id: seeded.workerIds.get(w.name)! }));
  const pending: QueuedRequest[] = rows.requests.map((r) => ({ ...r, id: seeded.requestIds.get(r.key)! }));
  const live = workers.filter((w) => !w.terminated);
  const backedOff = new Set<string>();
  if (workers.length) {
    for (const [ri, wi] of world.backoffs) {
      const r = pending[ri % pending.length];
      const w = workers[wi % workers.length];
      backedOff.add(`${r.id}:${w.name}`);
      await t.sql(
        `insert into release_backoff (work_request_id, worker_id, until) values (?, ?, now() + interval '1 hour') on conflict do nothing`,
        [r.id, w.id],
      );
    }
  }
  // The history of each request's task: its recent average as two runs yesterday, and maybe a long run 40 days ago.
  const history = historyOf(world);
  for (const [i, r] of world.requests.entries()) {
    const name = rows.requests[i].key;
    if (r.historySeconds !== undefined)
      await t.sql(
        `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', ?, current_date - 1, 2, ?)`,
        [name, 2 * r.historySeconds],
      );
    if (r.oldHistory)
      await t.sql(
        `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', ?, current_date - 40, 1, 1000000)`,
        [name],
      );
  }
  const { config } = t.app;
  const cache = t.app.scheduler.classes;
  const em = t.app.orm.em.fork();

  // Candidates: the bulk function on the loaded rows, and the GraphQL query, both ways.
  const states = await loadWorkerStates(em, new Date(), config.workers.metadataFreshMs);
  const tasks = await loadTaskTags(
    em,
    pending.map((r) => r.id),
  );
  const res = await t.gql<Record<'available' | 'all', { workRequestId: string; workerNames: string[] }[]>>(CANDIDATES, {
    ids: pending.map((r) => String(r.id)),
  });
  expect(res.errors).toBeUndefined();
  for (const availableOnly of [true, false]) {
    const expected = new Map(
      pending.map((r) => [
        r.id,
        live
          .filter((w) => matches(r, w) && (!availableOnly || refFree(w) > 0))
          .sort(byName)
          .map((w) => w.name),
      ]),
    );
    const found = candidatesOf(tasks, states, availableOnly);
    expect(new Map([...found].map(([id, list]) => [id, list.map((w) => w.name)]))).toEqual(expected);
    const answered = res.data![availableOnly ? 'available' : 'all'];
    expect(new Map(answered.map((c) => [Number(c.workRequestId), c.workerNames]))).toEqual(expected);
  }

  // Demand: per enabled pool, the pending requests its template runs; apart, those nothing could run.
  const demand = await computeDemand(em, cache, config, new Date());
  const enabledPools = rows.pools.filter((p) => p.enabled).sort(byName);
  const unschedulable = pending.filter(
    (r) =>
      !r.requiredTags.includes('worker:type:not-assignable') &&
      !live.some((w) => matches(r, w)) &&
      !enabledPools.some((p) => matches(r, templateOf(p))),
  );
  expect(demand.pendingTotal).toBe(pending.length);
  expect(
    demand.pools.map((d) => ({ pool: d.pool.name, runnable: d.pendingRunnable, idleSlots: d.idleCompatibleSlots })),
  ).toEqual(
    enabledPools.map((p) => {
      const runnable = pending.filter((r) => matches(r, templateOf(p)));
      const idle = live.filter((w) => refFree(w) > 0 && runnable.some((r) => matches(r, w)));
      return { pool: p.name, runnable: runnable.length, idleSlots: idle.reduce((s, w) => s + refFree(w), 0) };
    }),
  );
  expect(demand.unschedulable.reduce((s, g) => s + g.count, 0)).toBe(unschedulable.length);
  expect(demand.unschedulable.flatMap((g) => g.sampleIds).sort((a, b) => a - b)).toEqual(
    unschedulable.map((r) => r.id).sort((a, b) => a - b),
  );

  // Next work, worker by worker, each asked alone (rolled back): the first matching request in queue order.
  for (const w of workers) {
    const got = await inRollback(t, (tx) => assignNextWork(tx, cache, config.workers, w.id, new Date()));
    expect(got?.workRequestId ?? null, `next work of ${w.name}`).toBe(refNext(w, pending, backedOff)?.id ?? null);
  }

  // A full pass (rolled back): matching, available, within capacity, maximal, never overtaking, and
  // static workers first: what went to a pool worker, no static worker that could run it had room for.
  const assigned = await inRollback(t, (tx) =>
    runPass(tx, cache, new TaskHistoryCache(HEAVY_SECONDS), config.workers, new Date()),
  );
  // Exactly the full read's assignments, whatever the first number of heads per class and the bound.
  const passWith = (maxAssignments: number | undefined, options: PassOptions) =>
    inRollback(t, (tx) =>
      runPass(tx, cache, new TaskHistoryCache(HEAVY_SECONDS), config.workers, new Date(), maxAssignments, options),
    );
  const fullRead = await passWith(undefined, { firstHeads: Infinity, readAll: true });
  expect(assigned).toEqual(fullRead);
  for (const firstHeads of [1, 2])
    expect(await passWith(undefined, { firstHeads }), `first heads ${firstHeads}`).toEqual(fullRead);
  for (const max of [1, 2])
    expect(await passWith(max, { firstHeads: 1 }), `at most ${max}`).toEqual(
      await passWith(max, { firstHeads: Infinity, readAll: true }),
    );
  const taken = new Map(assigned.map((a) => [a.workRequestId, workers.find((w) => w.id === a.workerId)!]));
  expect(taken.size).toBe(assigned.length);
  const left = new Map(workers.map((w) => [w.id, refFree(w)]));
  for (const [rid, w] of taken) {
    const r = pending.find((p) => p.id === rid)!;
    expect(offered(r, w, backedOff), `${r.key} on ${w.name}`).toBe(true);
    left.set(w.id, left.get(w.id)! - 1);
  }
  expect([...left.values()].every((n) => n >= 0)).toBe(true);
  for (const [rid, w] of taken) {
    const r = pending.find((p) => p.id === rid)!;
    for (const x of workers.filter(
      (x) => offered(r, x, backedOff) && refPrefers(refHeavy(r, history), placed(x), placed(w)),
    ))
      expect(left.get(x.id), `${r.key} went to ${w.name} while preferred ${x.name} had room`).toBe(0);
  }
  for (const r of pending.filter((p) => !taken.has(p.id))) {
    for (const w of workers.filter((x) => offered(r, x, backedOff))) {
      expect(left.get(w.id), `${r.key} left pending while ${w.name} has a free slot`).toBe(0);
      for (const [rid, holder] of taken) {
        if (holder.id === w.id)
          expect(
            queueOrder(
              r,
              pending.find((p) => p.id === rid)!,
            ),
            `${r.key} overtaken on ${w.name}`,
          ).toBeGreaterThan(0);
      }
    }
  }

  // Pull through GraphQL, one call after another: each call is a heartbeat, then the reference's pick.
  let queue = pending;
  for (const n of world.calls) {
    if (!workers.length) break;
    const w = workers[n % workers.length];
    const res = await t.gql<{ requestWork: { __typename: string; workRequest: { id: string } | null } }>(
      REQUEST_WORK,
      {},
      seeded.tokens.get(w.name)!,
    );
    if (w.terminated) {
      expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
      continue;
    }
    expect(res.errors).toBeUndefined();
    const expected = refNext(w, queue, backedOff, true);
    expect(res.data!.requestWork.workRequest?.id ?? null, `requestWork of ${w.name}`).toBe(
      expected ? String(expected.id) : null,
    );
    if (expected) {
      queue = queue.filter((r) => r.id !== expected.id);
      workers[workers.indexOf(w)] = { ...w, active: w.active + 1 };
    }
  }
}

describe('the bulk scheduler against matchTags, on the database', () => {
  it('candidates, next work, passes, demand and requestWork agree with the reference on random worlds', async () => {
    await fc.assert(fc.asyncProperty(worldArb, checkWorld), { numRuns: DB_RUNS });
  }, 240_000); // 15-35 s on an idle 2-core machine; the margin is for a shared one
});
