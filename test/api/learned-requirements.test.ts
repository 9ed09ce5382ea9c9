/**
 * Learned minimums (TAGSCHED_LEARNED_REQUIREMENTS): the runs of a task, package and architecture
 * recorded by completions through the API, on at least two workers, make the next request of that key
 * require the memory and disk they used (95th percentile, with headroom, capped by the second worker's
 * highest figure), in its frozen tags with provenance and source; demand starts the pool that fits, the
 * diagnosis names the tag; a user's higher minimum binds; off, nothing. An unknown figure counts for
 * nothing; a figure counts no more than its worker offers; a request learns only from the runs of its
 * own workspace and public ones, unless the site shares its history (TAGSCHED_SHARED_HISTORY).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { LEARNED_HEADROOM } from '../../src/core/tasks/learned-requirements.js';
import { useTestApp, type TestApp } from '../helpers/app.js';
import {
  addMember,
  connectedWorker,
  createPool,
  createWorkspace,
  memberOf,
  ok,
  submitOk,
} from '../helpers/fixtures.js';

type Json = Record<string, any>;

const on = useTestApp({ statistics: { learnedRequirements: true } });
const off = useTestApp();
const shared = useTestApp({ statistics: { learnedRequirements: true, sharedHistory: true } });

const GIB = 1024 ** 3;
const COMPLETE = `mutation($id: ID!, $s: RunStatisticsInput) { completeWorkRequest(input: { id: $id, result: SUCCESS, statistics: $s }) { __typename } }`;
const STATS = `query($p: String, $a: String) { taskStatistics(taskType: "worker", taskName: "sbuild", package: $p, architecture: $a) { count memory { p95 } disk { p95 } } }`;
const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { status requiredTags { tag provenance source } droppedTags { tag }
  diagnosis { state matchingPools mismatches { pool workerNames missingOnWorker } } } }`;
const DEMAND = `{ provisioningDemand { pools { pool { name } pendingRunnable launch } unschedulable { count } } }`;
const AMD64_POOL = [
  'worker:build-arch:amd64',
  'worker:executor:unshare',
  'worker:cap:sbuild',
  'worker:task:worker:sbuild:version:1',
];

const sbuildOf = (pkg: string, extra: Json = {}, workspace = 'learn/main') => ({
  workspace,
  taskType: 'worker',
  taskName: 'sbuild',
  taskData: { source_package: pkg, host_architecture: 'amd64' },
  ...extra,
});

/** A worker that completes runs (its id and token); it runs no sbuild itself, so it never takes the requests the tests look at. */
interface Builder {
  id: number;
  token: string;
}

/** Connects builders of this size (GiB) that do not run sbuild (no tools, no tasks). */
async function builders(t: TestApp, names: string[], memoryGib: number, diskGib: number): Promise<Builder[]> {
  const out: Builder[] = [];
  for (const name of names) {
    const token = await connectedWorker(
      t,
      name,
      {},
      {
        architectures: ['amd64'],
        cpuCount: 4,
        totalPhysicalMemory: memoryGib * GIB,
        diskFree: diskGib * GIB,
        executors: ['unshare'],
      },
    );
    const [{ id }] = await t.sql<{ id: number }>(`select id from worker where name = ?`, [name]);
    out.push({ id, token });
  }
  return out;
}

/** The figures of run `i` of a history: these peaks, and `flags` (a figure set to undefined is omitted). */
const runFigures = (i: number, memoryBytes: number, diskBytes: number, flags: Json = {}): Json => ({
  setupSeconds: 1,
  runSeconds: 60 + i,
  teardownSeconds: 1,
  cpuSeconds: 30,
  cpuCount: 4,
  memoryMethod: 'PROCESS_TREE',
  peakMemoryBytes: memoryBytes + i * 2 ** 20,
  peakDiskBytes: diskBytes,
  ...flags,
});

/** Runs `n` builds of `pkg` to completion through the API, on `by` in turn, each reporting these peaks; the ids of the requests. */
async function history(
  t: TestApp,
  by: Builder[],
  pkg: string,
  n: number,
  memoryBytes: number,
  diskBytes: number,
  flags: Json = {},
  workspace = 'learn/main',
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const worker = by[i % by.length]!;
    const { id } = await submitOk(t, sbuildOf(pkg, {}, workspace));
    await t.sql(`update work_request set status = 'ASSIGNED', worker_id = ?, assigned_at = now() where id = ?`, [
      worker.id,
      Number(id),
    ]);
    const statistics = JSON.parse(JSON.stringify(runFigures(i, memoryBytes, diskBytes, flags))) as Json;
    const r = await ok(t, COMPLETE, { id, s: statistics }, worker.token);
    expect(r.completeWorkRequest).toEqual({ __typename: 'WorkRequest' });
    ids.push(id as string);
  }
  return ids;
}

const learnedOf = (tags: { tag: string; provenance: string; source: string }[]) =>
  tags.filter((e) => e.source.startsWith('history:'));

describe('learned minimums, turned on', () => {
  let big: Builder[];
  beforeAll(async () => {
    await createWorkspace(on, 'learn/main');
    await connectedWorker(on, 'learn-1'); // runs sbuild: 8 GiB of memory, 50 GiB of disk
    big = await builders(on, ['build-1', 'build-2'], 32, 100);
    await createPool(on, {
      name: 'small',
      providedTags: AMD64_POOL,
      specifications: { memoryGib: 8, diskGib: 100 },
      maxActiveInstances: 2,
    });
    await createPool(on, {
      name: 'big',
      providedTags: AMD64_POOL,
      specifications: { memoryGib: 64, diskGib: 100 },
      maxActiveInstances: 2,
    });
    await history(on, big, 'hello', 4, 10 * GIB, 20 * GIB);
    await history(on, big, 'tiny', 4, 200 * 2 ** 20, 100 * 2 ** 20);
    await history(on, big, 'rare', 2, 10 * GIB, 20 * GIB);
  });

  it('flow from history into the frozen tags, the diagnosis and demand: the pool whose memory fits is started', async () => {
    const stats = (await ok(on, STATS, { p: 'hello', a: 'amd64' })).taskStatistics;
    expect(stats.count).toBe(4);
    const memoryGib = Math.ceil((stats.memory.p95 * LEARNED_HEADROOM) / GIB);
    const diskGib = Math.ceil((stats.disk.p95 * LEARNED_HEADROOM) / GIB);
    expect(memoryGib).toBe(13); // 10 GiB and a few MiB, at most 5% over in its bucket, × 1.25, rounded up
    expect(diskGib).toBe(26);

    const { id } = await submitOk(on, sbuildOf('hello'));
    const { workRequest: wr } = await ok(on, DIAGNOSIS, { id });
    expect(wr.status).toBe('PENDING');
    expect(learnedOf(wr.requiredTags)).toEqual([
      { tag: `worker:disk-gib>=${diskGib}`, provenance: 'SYSTEM', source: 'history:sbuild:hello:amd64' },
      { tag: `worker:memory-gib>=${memoryGib}`, provenance: 'SYSTEM', source: 'history:sbuild:hello:amd64' },
    ]);
    // The 8 GiB worker lacks the learned memory; of the pools only the big one fits.
    expect(wr.diagnosis.matchingPools).toEqual(['big']);
    const workers = wr.diagnosis.mismatches.find((m: Json) => (m.workerNames as string[]).includes('learn-1'));
    expect(workers.missingOnWorker).toContain(`worker:memory-gib>=${memoryGib}`);
    const small = wr.diagnosis.mismatches.find((m: Json) => m.pool === 'small');
    expect(small.missingOnWorker).toEqual([`worker:memory-gib>=${memoryGib}`]);

    // The task's expected run (the median its agents reported, about a minute) makes one worker needed.
    const demand = (await ok(on, DEMAND)).provisioningDemand;
    expect(demand.pools).toEqual([
      { pool: { name: 'big' }, pendingRunnable: 1, launch: 1 },
      { pool: { name: 'small' }, pendingRunnable: 0, launch: 0 },
    ]);
    expect(demand.unschedulable).toEqual([]);
  });

  it('add nothing under the floor or with fewer runs than needed', async () => {
    for (const pkg of ['tiny', 'rare', 'unknown']) {
      const wr = await submitOk(on, sbuildOf(pkg));
      expect(learnedOf(wr.requiredTags as Json[] as never), pkg).toEqual([]);
    }
  });

  it('ask for more than the worker had after runs killed for memory or that filled the disk', async () => {
    // Runs on two 8 GiB, 50 GiB workers that report 3 GiB and 10 GiB, but were killed for memory and filled the disk.
    await history(on, await builders(on, ['small-1', 'small-2'], 8, 50), 'greedy', 3, 3 * GIB, 10 * GIB, {
      outOfMemory: true,
      diskFull: true,
    });
    const wr = await submitOk(on, sbuildOf('greedy'));
    const learned = learnedOf(wr.requiredTags as never).map((e: Json) => e.tag as string);
    const value = (name: string) => Number(learned.find((t) => t.startsWith(`${name}>=`))?.split('>=')[1]);
    expect(value('worker:memory-gib')).toBeGreaterThan(8);
    expect(value('worker:disk-gib')).toBeGreaterThan(50);
  });

  it("let a user's higher minimum bind, with both kept and nothing refused", async () => {
    const wr = await submitOk(on, sbuildOf('hello', { requiredTags: ['worker:memory-gib>=64'] }));
    const tags = wr.requiredTags as { tag: string; provenance: string; source: string }[];
    expect(tags).toContainEqual({ tag: 'worker:memory-gib>=64', provenance: 'USER', source: 'user-input' });
    expect(learnedOf(tags).map((e) => e.tag)).toContain('worker:memory-gib>=13');
    expect(wr.droppedTags).toEqual([]);
    // 64 binds: the big pool (64 GiB) still fits, and would not with 65.
    expect((await ok(on, DIAGNOSIS, { id: wr.id })).workRequest.diagnosis.matchingPools).toEqual(['big']);
    const higher = await submitOk(on, sbuildOf('hello', { requiredTags: ['worker:memory-gib>=65'] }));
    expect((await ok(on, DIAGNOSIS, { id: higher.id })).workRequest.diagnosis.matchingPools).toEqual([]);
  });
});

describe('learned minimums, turned off (the default)', () => {
  it('add nothing, whatever the history', async () => {
    await createWorkspace(off, 'learn/main');
    await history(off, await builders(off, ['build-1', 'build-2'], 32, 100), 'hello', 4, 10 * GIB, 20 * GIB);
    expect((await ok(off, STATS, { p: 'hello', a: 'amd64' })).taskStatistics.count).toBe(4);
    const wr = await submitOk(off, sbuildOf('hello'));
    expect(learnedOf(wr.requiredTags as never)).toEqual([]);
  });
});

const FIGURES = `query($p: String, $a: String) { taskStatistics(taskType: "worker", taskName: "sbuild", package: $p, architecture: $a) {
  count duration { count } memory { count median p95 } disk { count median p95 } } }`;
const KEPT = `query($id: ID!) { workRequest(id: $id) { statistics { cpuSeconds peakMemoryBytes peakDiskBytes } } }`;
const learnedTags = (wr: Json) =>
  learnedOf(wr.requiredTags as never)
    .map((e: Json) => e.tag as string)
    .sort();

describe('an unknown figure', () => {
  let two: Builder[];
  beforeAll(async () => {
    await createWorkspace(on, 'unknown/main');
    two = await builders(on, ['unknown-1', 'unknown-2'], 32, 100);
  });

  it.each([
    { omitted: ['peakDiskBytes'], memory: true, disk: false },
    { omitted: ['peakMemoryBytes', 'cpuSeconds'], memory: false, disk: true },
    { omitted: ['peakMemoryBytes', 'peakDiskBytes', 'cpuSeconds'], memory: false, disk: false },
  ])(
    'counts for nothing in the aggregates or the learned minimums ($omitted omitted)',
    async ({ omitted, memory, disk }) => {
      const pkg = `unknown-${omitted.join('-').toLowerCase()}`;
      const ids = await history(
        on,
        two,
        pkg,
        3,
        10 * GIB,
        20 * GIB,
        Object.fromEntries(omitted.map((f) => [f, undefined])),
        'unknown/main',
      );
      for (const id of ids) {
        const kept = (await ok(on, KEPT, { id })).workRequest.statistics;
        for (const f of omitted) expect(kept[f], f).toBeNull();
      }
      const stats = (await ok(on, FIGURES, { p: pkg, a: 'amd64' })).taskStatistics;
      expect(stats.count).toBe(3);
      expect(stats.duration.count).toBe(3);
      // What was reported counts, within its bucket (at most 5% above); what was not, not at all.
      for (const [figure, reported, bytes] of [
        [stats.memory, memory, 10 * GIB + 2 * 2 ** 20],
        [stats.disk, disk, 20 * GIB],
      ] as const) {
        if (!reported) expect(figure).toBeNull();
        else {
          expect(figure.count).toBe(3);
          expect(figure.p95).toBeGreaterThanOrEqual(bytes);
          expect(figure.p95).toBeLessThan(bytes * 1.05);
        }
      }
      // The task as a whole counts them for nothing either.
      const all = (await ok(on, FIGURES, {})).taskStatistics;
      for (const figure of [all.memory, all.disk]) if (figure) expect(figure.p95).toBeLessThan(64 * GIB);

      const wr = await submitOk(on, sbuildOf(pkg, {}, 'unknown/main'));
      expect(learnedTags(wr)).toEqual([
        ...(disk ? ['worker:disk-gib>=26'] : []),
        ...(memory ? ['worker:memory-gib>=13'] : []),
      ]);
    },
  );
});

describe("a worker's figures", () => {
  beforeAll(async () => {
    await createWorkspace(on, 'bounds/main');
  });

  it('count no more than the worker offers, and one worker neither makes a minimum nor sets its size', async () => {
    // A worker of 8 GiB of memory and 100 GiB of disk (4 CPUs) reports the largest figures accepted.
    const liar = await builders(on, ['liar'], 8, 100);
    const ids = await history(
      on,
      liar,
      'bloat',
      3,
      2 ** 50,
      2 ** 50,
      { peakMemoryBytes: 2 ** 50, cpuSeconds: 1e9 },
      'bounds/main',
    );
    const kept = (await ok(on, KEPT, { id: ids[0] })).workRequest.statistics;
    expect(kept).toEqual({ peakMemoryBytes: 8 * GIB, peakDiskBytes: 100 * GIB, cpuSeconds: 60 * 4 });
    const stats = (await ok(on, FIGURES, { p: 'bloat', a: 'amd64' })).taskStatistics;
    expect(stats.memory.count).toBe(3);
    expect(stats.memory.p95).toBeGreaterThanOrEqual(8 * GIB);
    expect(stats.memory.p95).toBeLessThan(8 * GIB * 1.05);
    expect(stats.disk.p95).toBeLessThan(100 * GIB * 1.05);
    // Three runs, but from one worker: no minimum.
    expect(learnedTags(await submitOk(on, sbuildOf('bloat', {}, 'bounds/main')))).toEqual([]);

    // A second worker's run makes one, no bigger than that worker's own figures: the first worker's
    // three runs at its full size (the 95th percentile) do not decide alone.
    const [honest] = await builders(on, ['honest'], 32, 100);
    await history(on, [honest!], 'bloat', 1, 3 * GIB, 5 * GIB, {}, 'bounds/main');
    expect((await ok(on, FIGURES, { p: 'bloat', a: 'amd64' })).taskStatistics.memory.p95).toBeGreaterThanOrEqual(
      8 * GIB,
    );
    expect(learnedTags(await submitOk(on, sbuildOf('bloat', {}, 'bounds/main')))).toEqual([
      'worker:disk-gib>=7',
      'worker:memory-gib>=4',
    ]);
  });
});

describe('the runs a request learns from', () => {
  let outsider: string;
  let insider: string;
  beforeAll(async () => {
    await createWorkspace(on, 'open/main');
    await createWorkspace(on, 'hush/main', { isPublic: false });
    // Contributors of the public workspace; only one of them is a member of the private one.
    outsider = await memberOf(on, 'open/main', 'outsider');
    insider = await memberOf(on, 'hush/main', 'insider');
    await addMember(on, 'open/main', 'insider');
    const two = await builders(on, ['hush-1', 'hush-2'], 32, 100);
    await history(on, two, 'hushed', 3, 10 * GIB, 20 * GIB, {}, 'hush/main');
    await history(on, two, 'shown', 3, 10 * GIB, 20 * GIB, {}, 'open/main');
  });

  it("are its own workspace's and public ones: a private workspace's runs tell nothing to other workspaces' requests", async () => {
    const sized = ['worker:disk-gib>=26', 'worker:memory-gib>=13'];
    // An outsider's request in a public workspace: the private runs add nothing, as for a package nobody built.
    expect(learnedTags(await submitOk(on, sbuildOf('hushed', {}, 'open/main'), outsider))).toEqual([]);
    expect(learnedTags(await submitOk(on, sbuildOf('never-built', {}, 'open/main'), outsider))).toEqual([]);
    // Nor do they to a member's request in that public workspace, whose tags everybody may see.
    expect(learnedTags(await submitOk(on, sbuildOf('hushed', {}, 'open/main'), insider))).toEqual([]);
    // In the private workspace itself, they count.
    expect(learnedTags(await submitOk(on, sbuildOf('hushed', {}, 'hush/main'), insider))).toEqual(sized);
    // A public workspace's runs count for everybody's requests, in any workspace.
    expect(learnedTags(await submitOk(on, sbuildOf('shown', {}, 'open/main'), outsider))).toEqual(sized);
    expect(learnedTags(await submitOk(on, sbuildOf('shown', {}, 'hush/main'), insider))).toEqual(sized);
  });

  it('are every workspace\u2019s where the site shares its history (TAGSCHED_SHARED_HISTORY), from two workers still', async () => {
    await createWorkspace(shared, 'open/main');
    await createWorkspace(shared, 'hush/main', { isPublic: false });
    const stranger = await memberOf(shared, 'open/main', 'stranger');
    const [one, two] = await builders(shared, ['hush-1', 'hush-2'], 32, 100);
    await history(shared, [one!], 'hushed', 3, 10 * GIB, 20 * GIB, {}, 'hush/main');
    expect(learnedTags(await submitOk(shared, sbuildOf('hushed', {}, 'open/main'), stranger))).toEqual([]);
    await history(shared, [two!], 'hushed', 1, 10 * GIB, 20 * GIB, {}, 'hush/main');
    expect(learnedTags(await submitOk(shared, sbuildOf('hushed', {}, 'open/main'), stranger))).toEqual([
      'worker:disk-gib>=26',
      'worker:memory-gib>=13',
    ]);
  });
});
