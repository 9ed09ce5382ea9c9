/**
 * Learned minimums (TAGSCHED_LEARNED_REQUIREMENTS): the runs of a task, package and architecture
 * recorded by completions through the API make the next request of that key require the memory and
 * disk they used (95th percentile, with headroom), in its frozen tags with provenance and source; demand
 * starts the pool that fits, the diagnosis names the tag; a user's higher minimum binds; off, nothing.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { LEARNED_HEADROOM } from '../../src/tasks/learned-requirements.js';
import { useTestApp, type TestApp } from '../helpers/app.js';
import { connectedWorker, createPool, createWorkspace, ok, submitOk } from '../helpers/fixtures.js';

type Json = Record<string, any>;

const on = useTestApp({ learnedRequirements: true });
const off = useTestApp();

const GIB = 1024 ** 3;
const COMPLETE = `mutation($id: ID!, $s: RunStatisticsInput) { completeWorkRequest(input: { id: $id, result: SUCCESS, statistics: $s }) { __typename } }`;
const STATS = `query($p: String, $a: String) { taskStatistics(taskType: "worker", taskName: "sbuild", package: $p, architecture: $a) { count memory { p95 } disk { p95 } } }`;
const DIAGNOSIS = `query($id: ID!) { workRequest(id: $id) { status requiredTags { tag provenance source } droppedTags { tag }
  diagnosis { state matchingPools mismatches { pool workerNames missingOnWorker } } } }`;
const DEMAND = `{ provisioningDemand { pools { pool { name } pendingRunnable launch } unschedulable { count } } }`;
const AMD64_POOL = ['worker:build-arch:amd64', 'worker:executor:unshare', 'worker:cap:sbuild', 'worker:task:worker:sbuild:version:1'];

const sbuildOf = (pkg: string, extra: Json = {}) => ({
  workspace: 'learn/main',
  taskType: 'worker',
  taskName: 'sbuild',
  taskData: { source_package: pkg, host_architecture: 'amd64' },
  ...extra,
});

/** Runs `n` builds of `pkg` to completion through the API, each reporting these peaks. */
async function history(t: TestApp, worker: string, pkg: string, n: number, memoryBytes: number, diskBytes: number, flags: Json = {}): Promise<void> {
  const [{ id: workerId }] = await t.sql<{ id: number }>(`select id from worker where name = 'learn-1'`);
  for (let i = 0; i < n; i++) {
    const { id } = await submitOk(t, sbuildOf(pkg));
    await t.sql(`update work_request set status = 'ASSIGNED', worker_id = ?, assigned_at = now() where id = ?`, [workerId, Number(id)]);
    const statistics = {
      setupSeconds: 1,
      runSeconds: 60 + i,
      teardownSeconds: 1,
      cpuCount: 4,
      memoryMethod: 'PROCESS_TREE',
      peakMemoryBytes: memoryBytes + i * 2 ** 20,
      peakDiskBytes: diskBytes,
      ...flags,
    };
    const r = await ok(t, COMPLETE, { id, s: statistics }, worker);
    expect(r.completeWorkRequest).toEqual({ __typename: 'WorkRequest' });
  }
}

const learnedOf = (tags: { tag: string; provenance: string; source: string }[]) => tags.filter((e) => e.source.startsWith('history:'));

describe('learned minimums, turned on', () => {
  let worker: string;
  beforeAll(async () => {
    await createWorkspace(on, 'learn/main');
    worker = await connectedWorker(on, 'learn-1'); // 8 GiB of memory, 50 GiB of disk
    await createPool(on, { name: 'small', providedTags: AMD64_POOL, specifications: { memoryGib: 8, diskGib: 100 }, maxActiveInstances: 2 });
    await createPool(on, { name: 'big', providedTags: AMD64_POOL, specifications: { memoryGib: 64, diskGib: 100 }, maxActiveInstances: 2 });
    await history(on, worker, 'hello', 4, 10 * GIB, 20 * GIB);
    await history(on, worker, 'tiny', 4, 200 * 2 ** 20, 100 * 2 ** 20);
    await history(on, worker, 'rare', 2, 10 * GIB, 20 * GIB);
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
    // Runs on the 8 GiB, 50 GiB worker that report 3 GiB and 10 GiB, but were killed for memory and filled the disk.
    await history(on, worker, 'greedy', 3, 3 * GIB, 10 * GIB, { outOfMemory: true, diskFull: true });
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
    const worker = await connectedWorker(off, 'learn-1');
    await history(off, worker, 'hello', 4, 10 * GIB, 20 * GIB);
    expect((await ok(off, STATS, { p: 'hello', a: 'amd64' })).taskStatistics.count).toBe(4);
    const wr = await submitOk(off, sbuildOf('hello'));
    expect(learnedOf(wr.requiredTags as never)).toEqual([]);
  });
});
