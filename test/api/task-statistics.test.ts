import { beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_EXPECTED_SECONDS,
  TaskHistoryCache,
  expectedDurationSeconds,
  readDurationHistory,
} from '../../src/scheduler/storage/task-history.js';
import { bucketSql, bucketValue, pruneTaskStatistics } from '../../src/scheduler/storage/task-statistics.js';
import { ADMIN_TOKEN, useTestApp } from '../helpers/app.js';
import { runCli } from '../cli/admin/harness.js';
import { connectedWorker, createUser, createWorkspace, ok, sbuild } from '../helpers/fixtures.js';

// Task statistics: every completion with figures counts its run in the daily histograms of its task and
// of its task, package and architecture, in the statement that keeps the figures. Run concurrently
// through the API, the histograms must equal a recomputation from the kept figures, and the aggregates
// the nearest-rank percentiles of the figures (to the bucket).
const t = useTestApp();

const COMPLETE = `mutation($id: ID!, $r: WorkRequestResult!, $s: RunStatisticsInput) {
  completeWorkRequest(input: { id: $id, result: $r, statistics: $s }) { __typename ... on Error { code message } }
}`;
const STATS = `query($type: String!, $name: String!, $p: String, $a: String, $d: Int) {
  taskStatistics(taskType: $type, taskName: $name, package: $p, architecture: $a, days: $d) {
    taskType taskName package architecture days count
    duration { count median p95 } memory { count median p95 } disk { count median p95 }
  }
}`;
const GIB = 1024 ** 3;

let worker: string;
let workerId: number;

async function create(pkg: string, arch: string): Promise<number> {
  const d = await ok(
    t,
    `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { ... on WorkRequest { id } ... on Error { code message } } }`,
    {
      i: sbuild('debian/main', pkg, { taskData: { source_package: pkg, host_architecture: arch } }),
    },
  );
  const id = Number((d.createWorkRequest as { id: string }).id);
  // Assigned as a pass would (which worker a pass picks is not what these tests are about).
  await t.sql(
    `update work_request set status = 'ASSIGNED', worker_id = ?, assigned_at = now() where id = ? and status = 'PENDING'`,
    [workerId, id],
  );
  return id;
}

/** A deterministic spread of figures: run i took (i % 13 + 1) × 37 s, used (i % 7 + 1) × 300 MiB and (i % 5 + 1) GiB of disk. */
const figures = (i: number) => ({
  setupSeconds: 0.5,
  runSeconds: ((i % 13) + 1) * 37.25,
  teardownSeconds: 0.1,
  cpuSeconds: 10,
  peakMemoryBytes: ((i % 7) + 1) * 300 * 2 ** 20,
  peakDiskBytes: ((i % 5) + 1) * GIB,
  cpuCount: 4,
  memoryMethod: 'PROCESS_TREE',
});

/** The histogram rows, as the completions wrote them. */
const histogram = () =>
  t.sql<{ k: string }>(
    `select concat_ws('|', task_type, task_name, package, architecture, metric, bucket, count) as k from task_statistics_histogram order by 1`,
  );

/** The same rows recomputed from the kept figures of every run (two keys per run: the task, and the task with its package and architecture). */
const recomputed = () =>
  t.sql<{ k: string }>(
    `with runs as (
       select r.task_type, r.task_name, s.run_seconds, s.peak_memory_bytes, s.peak_disk_bytes, s.out_of_memory, s.memory_limit_bytes,
              (select substring(x->>'tag' from '^task:source-package:(.*)$') from jsonb_array_elements(r.provided_entries) x where x->>'tag' like 'task:source-package:%' limit 1) as package,
              (select substring(x->>'tag' from '^worker:build-arch:(.*)$') from jsonb_array_elements(r.required_entries) x where x->>'tag' like 'worker:build-arch:%' limit 1) as architecture
         from work_request_statistics s join work_request r on r.id = s.work_request_id
     ), keyed as (
       select task_type, task_name, '' as package, '' as architecture, run_seconds, peak_memory_bytes, peak_disk_bytes, out_of_memory, memory_limit_bytes from runs
       union all
       select task_type, task_name, package, architecture, run_seconds, peak_memory_bytes, peak_disk_bytes, out_of_memory, memory_limit_bytes from runs
     ), metric as (
       select task_type, task_name, package, architecture, 'duration' as metric, run_seconds * 1000 as v from keyed
       union all select task_type, task_name, package, architecture, 'memory', case when out_of_memory then greatest(peak_memory_bytes, least(memory_limit_bytes::float8, 8 * ${GIB}::float8)) else peak_memory_bytes end from keyed
       union all select task_type, task_name, package, architecture, 'disk', peak_disk_bytes from keyed
     )
     select concat_ws('|', task_type, task_name, package, architecture, metric, ${bucketSql('v')}, count(*)) as k
       from metric group by task_type, task_name, package, architecture, metric, ${bucketSql('v')} order by 1`,
  );

/** The nearest-rank percentile p of `values`, as the bucket estimate it must equal. */
function percentileEstimate(values: number[], p: number, scale = 1): number {
  const sorted = [...values].sort((a, b) => a - b);
  const v = sorted[Math.ceil(p * sorted.length) - 1];
  const bucket = Math.floor(Math.log(Math.max(v * scale, 1)) / Math.log(1.05));
  return bucketValue(bucket) / scale;
}

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
  worker = await connectedWorker(t, 'stats-1'); // 8 GiB of memory (AMD64_METADATA)
  workerId = (await t.sql<{ id: number }>(`select id from worker where name = 'stats-1'`))[0].id;
});

describe('task statistics', () => {
  it('are kept exact under 40 concurrent completions through the API, both completion paths, and a repeated report counts once', async () => {
    const runs = Array.from({ length: 40 }, (_, i) => ({
      i,
      pkg: i % 2 ? 'hello' : 'dpkg',
      arch: i % 4 < 2 ? 'amd64' : 'arm64',
    }));
    const ids = await Promise.all(runs.map((r) => create(r.pkg, r.arch)));
    // Every third one fails: it takes the transaction (the row locked) instead of the one-statement SUCCESS.
    const answers = await Promise.all(
      runs.map((r, n) =>
        t.gql(COMPLETE, { id: String(ids[n]), r: r.i % 3 ? 'SUCCESS' : 'FAILURE', s: figures(r.i) }, worker),
      ),
    );
    for (const a of answers)
      expect(a.data?.completeWorkRequest, JSON.stringify(a)).toEqual({ __typename: 'WorkRequest' });
    // The agent retrying a report whose answer it lost: recorded once.
    await t.gql(COMPLETE, { id: String(ids[1]), r: 'SUCCESS', s: figures(1) }, worker);

    expect((await t.sql(`select count(*)::int as n from work_request_statistics`))[0].n).toBe(40);
    const kept = await histogram();
    expect(kept.length).toBeGreaterThan(0);
    expect(kept).toEqual(await recomputed());

    // The aggregates: the task as a whole, then one package and architecture.
    const all = (await ok(t, STATS, { type: 'worker', name: 'sbuild' })).taskStatistics as Record<string, any>;
    expect(all).toMatchObject({
      taskType: 'worker',
      taskName: 'sbuild',
      package: null,
      architecture: null,
      days: 30,
      count: 40,
    });
    const seconds = runs.map((r) => figures(r.i).runSeconds);
    expect(all.duration.median).toBeCloseTo(percentileEstimate(seconds, 0.5, 1000), 9);
    expect(all.duration.p95).toBeCloseTo(percentileEstimate(seconds, 0.95, 1000), 9);
    expect(all.memory.p95).toBeCloseTo(
      percentileEstimate(
        runs.map((r) => figures(r.i).peakMemoryBytes),
        0.95,
      ),
      0,
    );
    expect(all.disk.median).toBeCloseTo(
      percentileEstimate(
        runs.map((r) => figures(r.i).peakDiskBytes),
        0.5,
      ),
      0,
    );
    // An estimate is at most 5% above the true value, never below it.
    const trueP95 = [...seconds].sort((a, b) => a - b)[Math.ceil(0.95 * 40) - 1];
    expect(all.duration.p95).toBeGreaterThanOrEqual(trueP95);
    expect(all.duration.p95).toBeLessThan(trueP95 * 1.05);

    const helloArm = runs.filter((r) => r.pkg === 'hello' && r.arch === 'arm64');
    const one = (await ok(t, STATS, { type: 'worker', name: 'sbuild', p: 'hello', a: 'arm64' }))
      .taskStatistics as Record<string, any>;
    expect(one).toMatchObject({ package: 'hello', architecture: 'arm64', count: helloArm.length });
    expect(one.memory.median).toBeCloseTo(
      percentileEstimate(
        helloArm.map((r) => figures(r.i).peakMemoryBytes),
        0.5,
      ),
      0,
    );

    // The expected duration of the task (demand's estimate) is this median, not the average wall time
    // from start to completion (these requests were completed without a start: 0 s).
    const durations = await readDurationHistory(t.app.orm.em.fork());
    expect(expectedDurationSeconds(durations, 'worker', 'sbuild')).toBe(all.duration.median);
    expect(durations.averageSeconds.get('worker/sbuild')).toBeLessThan(5);
    expect(expectedDurationSeconds(durations, 'worker', 'lintian')).toBe(DEFAULT_EXPECTED_SECONDS);
    // The same answer from the history the scheduler keeps per process (heavy work, start estimates).
    const cached = await new TaskHistoryCache(3600).get(t.app.orm.em.fork());
    expect(expectedDurationSeconds(cached, 'worker', 'sbuild')).toBe(all.duration.median);

    const none = (await ok(t, STATS, { type: 'worker', name: 'sbuild', p: 'nothing', a: 'amd64' }))
      .taskStatistics as Record<string, any>;
    expect(none).toMatchObject({ count: 0, duration: null, memory: null, disk: null });
  });

  it("count a run killed for memory as having used at least its worker's memory", async () => {
    const id = await create('oom-pkg', 'amd64');
    const a = await t.gql(
      COMPLETE,
      { id: String(id), r: 'FAILURE', s: { ...figures(0), peakMemoryBytes: 2 * GIB, outOfMemory: true } },
      worker,
    );
    expect(a.data?.completeWorkRequest).toEqual({ __typename: 'WorkRequest' });
    const one = (await ok(t, STATS, { type: 'worker', name: 'sbuild', p: 'oom-pkg', a: 'amd64' }))
      .taskStatistics as Record<string, any>;
    expect(one.memory.p95).toBeGreaterThanOrEqual(8 * GIB);
    expect(one.memory.p95).toBeLessThan(8 * GIB * 1.05);
    const shown = await ok(t, `query($id: ID!) { workRequest(id: $id) { statistics { outOfMemory diskFull } } }`, {
      id: String(id),
    });
    expect(shown.workRequest).toEqual({ statistics: { outOfMemory: true, diskFull: null } });
    expect(await histogram()).toEqual(await recomputed());
  });

  it('count a run killed for memory under its agent\u2019s memory limit as having used that limit, not its worker\u2019s memory', async () => {
    const id = await create('limited-pkg', 'amd64');
    const s = { ...figures(0), peakMemoryBytes: 1.5 * GIB, outOfMemory: true, memoryLimitBytes: 2 * GIB };
    const a = await t.gql(COMPLETE, { id: String(id), r: 'FAILURE', s }, worker);
    expect(a.data?.completeWorkRequest).toEqual({ __typename: 'WorkRequest' });
    const one = (await ok(t, STATS, { type: 'worker', name: 'sbuild', p: 'limited-pkg', a: 'amd64' }))
      .taskStatistics as Record<string, any>;
    expect(one.memory.p95).toBeGreaterThanOrEqual(2 * GIB);
    expect(one.memory.p95).toBeLessThan(2 * GIB * 1.05);
    const shown = await ok(t, `query($id: ID!) { workRequest(id: $id) { statistics { memoryLimitBytes } } }`, {
      id: String(id),
    });
    expect(shown.workRequest).toEqual({ statistics: { memoryLimitBytes: 2 * GIB } });
    expect(await histogram()).toEqual(await recomputed());
  });

  it('are read by any authenticated caller; anonymous callers and bad arguments get an error, never a 500', async () => {
    const userToken = await createUser(t, 'stats-reader');
    const asUser = await t.gql(STATS, { type: 'worker', name: 'sbuild' }, userToken);
    expect(asUser.data?.taskStatistics?.count, JSON.stringify(asUser)).toBeGreaterThan(0);
    const anonymous = await t.gql(STATS, { type: 'worker', name: 'sbuild' }, null);
    expect(anonymous.status).toBe(200);
    expect(anonymous.data?.taskStatistics ?? null).toBeNull();
    expect(anonymous.errors?.[0]?.extensions?.code, JSON.stringify(anonymous)).toBe('UNAUTHENTICATED');
    // Per package and architecture: admins only (those figures count private workspaces' runs too).
    const perPackage = await t.gql(STATS, { type: 'worker', name: 'sbuild', p: 'hello', a: 'arm64' }, userToken);
    expect(perPackage.status).toBe(200);
    expect(perPackage.errors?.[0]?.extensions?.code, JSON.stringify(perPackage)).toBe('FORBIDDEN');
    expect(perPackage.data?.taskStatistics ?? null).toBeNull();
    for (const bad of [
      { name: 'sb\0uild' },
      { name: 'x'.repeat(100_000) },
      { d: 0 },
      { d: 31 },
      { d: 2 ** 31 - 1 },
      { p: 'a\0b', a: 'amd64' },
      { p: 'hello' }, // package and architecture go together
      { a: 'amd64' },
    ]) {
      const r = await t.gql(STATS, { type: 'worker', name: 'sbuild', ...bad }, userToken);
      expect(r.status, JSON.stringify(r)).toBe(200);
      expect(r.errors?.[0]?.extensions?.code, JSON.stringify(r)).toBe('INVALID_INPUT');
    }
  });

  it('are shown by tagsched-admin task stats, for people and as JSON; a bad --days is a usage error', async () => {
    const { url } = await t.app.start();
    const people = await runCli(url, ['task', 'stats', 'sbuild', '--package', 'hello', '--arch', 'arm64'], {
      token: ADMIN_TOKEN,
    });
    expect(people.code, people.stderr).toBe(0);
    const expected = (await ok(t, STATS, { type: 'worker', name: 'sbuild', p: 'hello', a: 'arm64' }))
      .taskStatistics as Record<string, any>;
    expect(people.stdout).toContain(
      `worker/sbuild (package hello, architecture arm64): ${expected.count} runs in the last 30 days.`,
    );
    expect(people.stdout).toMatch(
      new RegExp(
        `run time\\s+${expected.count}\\s+${(expected.duration.median / 60).toFixed(1)} min\\s+${(expected.duration.p95 / 60).toFixed(1)} min`,
      ),
    );
    expect(people.stdout).toMatch(/peak memory\s+\d+\s+[\d.]+ (MiB|GiB)\s+[\d.]+ (MiB|GiB)/);
    const json = await runCli(url, ['task', 'stats', 'sbuild', '--days', '7', '--json'], { token: ADMIN_TOKEN });
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout).taskStatistics).toMatchObject({
      taskType: 'worker',
      taskName: 'sbuild',
      package: null,
      days: 7,
      count: 42,
    });
    const bad = await runCli(url, ['task', 'stats', 'sbuild', '--days', '31'], { token: ADMIN_TOKEN });
    expect(bad.code).toBe(64);
    expect(bad.stderr).toContain('--days must be between 1 and 30');
    const half = await runCli(url, ['task', 'stats', 'sbuild', '--package', 'hello'], { token: ADMIN_TOKEN });
    expect(half.code).toBe(64);
    expect(half.stderr).toContain('--package and --arch go together');

    // On the status page of a request: its task, package and architecture lately, to authenticated viewers.
    const [{ id }] = await t.sql<{ id: number }>(
      `select r.id from work_request r join work_request_statistics s on s.work_request_id = r.id
        where r.task_data->>'source_package' = 'hello' and r.task_data->>'host_architecture' = 'arm64' order by r.id limit 1`,
    );
    const page = (token: string | null) =>
      fetch(url.replace(/\/graphql$/, `/-/status/work-requests/${id}/`), {
        headers: token ? { authorization: `Bearer ${token}` } : {},
      });
    const seen = await page(ADMIN_TOKEN);
    expect(seen.status).toBe(200);
    const html = await seen.text();
    expect(html).toContain(`Its task lately`);
    expect(html).toContain(`${expected.count} runs of sbuild for hello on arm64 in 30 days`);
    // Another signed-in viewer sees the task as a whole, not the package's runs.
    const asUser = await (await page(await createUser(t, 'page-reader'))).text();
    expect(asUser).toContain('Its task lately');
    expect(asUser).not.toContain(' for hello on arm64');
    expect(asUser).toMatch(/\d+ runs of sbuild in 30 days/);
    const anonymous = await page(null);
    expect(anonymous.status).toBe(200); // a public workspace: the request is shown, its task's aggregates are not
    expect(await anonymous.text()).not.toContain('Its task lately');
  });

  it('are pruned past their window by the housekeeping chore', async () => {
    await t.sql(
      `insert into task_statistics_histogram (task_type, task_name, package, architecture, day, metric, bucket, count)
       values ('worker', 'sbuild', '', '', current_date - 45, 'duration', 100, 7)`,
    );
    const before = (await histogram()).length;
    expect(await pruneTaskStatistics(t.app.orm.em.fork())).toBe(1);
    expect((await histogram()).length).toBe(before - 1);
    expect(await histogram()).toEqual(await recomputed());
  });

  it('count no figure above 1 PiB, whatever size a worker claims for a run killed for memory', async () => {
    await t.sql(
      `update worker set provided_tags = array_append(array_remove(provided_tags, 'worker:memory-gib=8'), 'worker:memory-gib=1000000000000') where id = ?`,
      [workerId],
    );
    const id = await create('claims-pkg', 'amd64');
    const a = await t.gql(COMPLETE, { id: String(id), r: 'FAILURE', s: { ...figures(0), outOfMemory: true } }, worker);
    expect(a.data?.completeWorkRequest).toEqual({ __typename: 'WorkRequest' });
    const one = (await ok(t, STATS, { type: 'worker', name: 'sbuild', p: 'claims-pkg', a: 'amd64' }))
      .taskStatistics as Record<string, any>;
    expect(one.memory.p95).toBeLessThanOrEqual(2 ** 50 * 1.05);
    expect(one.memory.p95).toBeGreaterThanOrEqual(2 ** 50);
  });
});
