/**
 * Host speed (docs/reference/host-speed.md): the speed scores a worker reports with its facts become
 * `worker:cpu-speed=N` and `worker:cpu-speed-all=N`; heavy work goes to the fastest free host that fits
 * (before the largest), other work still to the smallest; a request may require a minimum speed.
 * Through GraphQL on the real database: the placement of a new request, and a pass.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createWorkspace, submitOk } from '../helpers/fixtures.js';
import { abortAllActive, holderOf, resetScheduling } from '../helpers/scheduler-fixtures.js';

const t = useTestApp({ scheduler: { automatic: true, passDebounceMs: 3_600_000, passIntervalMs: 3_600_000 } });

const GIB = 1024 ** 3;

/** A connected amd64 worker of that size and speed (null: it reported none) that runs sbuild and noop and provides worker:class:large (so heavy work fits them all). */
async function machine(name: string, cpuCount: number, speed: { single: number; all: number } | null): Promise<void> {
  await connectedWorker(
    t,
    name,
    { staticMetadata: { providedTags: ['worker:class:large'] } },
    {
      architectures: ['amd64'],
      cpuCount,
      ...(speed ? { cpuSpeed: speed.single, cpuSpeedAll: speed.all } : {}),
      totalPhysicalMemory: 2 * cpuCount * GIB,
      diskFree: 100 * GIB,
      executors: ['unshare'],
      tools: ['sbuild'],
      tasks: [
        { type: 'worker', name: 'sbuild', version: 1 },
        { type: 'worker', name: 'noop', version: 1 },
      ],
    },
  );
}

const HEAVY = {
  workspace: 'speed/main',
  taskType: 'worker',
  taskName: 'noop',
  taskData: {},
  requiredTags: ['worker:class:large'],
};
const LIGHT = { workspace: 'speed/main', taskType: 'worker', taskName: 'noop', taskData: {} };

const submitted = async (input: Record<string, unknown>) => (await submitOk(t, input)).id as string;
const holder = (id: string) => holderOf(t, id);
const freeAll = () => abortAllActive(t);

beforeEach(async () => {
  await resetScheduling(t);
  await createWorkspace(t, 'speed/main').catch(() => undefined);
  // Registered from the largest down: the largest-first rule alone would pick 'unmeasured', then 'slow'.
  await machine('unmeasured', 64, null);
  await machine('slow', 32, { single: 900, all: 2000 });
  await machine('fast', 8, { single: 4100, all: 9100 });
});

describe('host speed', () => {
  it('the reported scores are valued tags of the worker, with worker provenance', async () => {
    const rows = await t.sql<{ name: string; provided_tags: string[] }>(
      `select name, provided_tags from worker where name in ('fast', 'unmeasured') order by name`,
    );
    expect(rows[0].provided_tags).toEqual(
      expect.arrayContaining(['worker:cpu-speed=4100', 'worker:cpu-speed-all=9100']),
    );
    expect(rows[1].provided_tags.filter((tag) => tag.startsWith('worker:cpu-speed'))).toEqual([]);
    const d = await t.gql(`{ worker(name: "fast") { providedTags { tag provenance } } }`);
    expect(d.errors).toBeUndefined();
    expect(d.data!.worker.providedTags).toEqual(
      expect.arrayContaining([{ tag: 'worker:cpu-speed-all=9100', provenance: 'WORKER' }]),
    );
  });

  it('heavy work goes to the fastest host on submission and in a pass; light work to the smallest', async () => {
    expect(await holder(await submitted(HEAVY))).toBe('fast');
    await freeAll();
    expect(await holder(await submitted(LIGHT))).toBe('fast'); // the smallest as well
    await freeAll();
    await t.sql(`update worker set enabled = false`);
    const heavy = await submitted(HEAVY);
    const second = await submitted(HEAVY);
    await t.sql(`update worker set enabled = true`);
    // The diagnosis says what the pass will do, and that speed decided.
    const d = await t.gql(
      `query($id: ID!) { workRequest(id: $id) { diagnosis { placement { heavy preferredWorkers decidedBy } } } }`,
      { id: heavy },
    );
    expect(d.errors).toBeUndefined();
    expect(d.data!.workRequest.diagnosis.placement).toEqual({
      heavy: true,
      preferredWorkers: ['fast', 'slow', 'unmeasured'],
      decidedBy: 'FASTEST_FOR_HEAVY',
    });
    expect(await t.app.scheduler.runPass()).toHaveLength(2);
    // The fastest, then the next fastest; the host without a score comes last.
    expect([await holder(heavy), await holder(second)]).toEqual(['fast', 'slow']);
  });

  it('a request may require a minimum speed: only a host that fast takes it, and none takes one above every host', async () => {
    await t.sql(`update worker set enabled = false where name = 'fast'`);
    const quick = await submitted({ ...LIGHT, requiredTags: ['worker:cpu-speed>=4000'] });
    expect(await holder(quick)).toBeNull();
    await t.sql(`update worker set enabled = true where name = 'fast'`);
    await t.app.scheduler.runPass();
    expect(await holder(quick)).toBe('fast');
    const never = await submitted({ ...LIGHT, requiredTags: ['worker:cpu-speed-all>=100000'] });
    await t.app.scheduler.runPass();
    expect(await holder(never)).toBeNull();
    const d = await t.gql(`query($id: ID!) { workRequest(id: $id) { diagnosis { mismatches { missingOnWorker } } } }`, {
      id: never,
    });
    expect(d.errors).toBeUndefined();
    const missing = d.data!.workRequest.diagnosis.mismatches.flatMap(
      (m: { missingOnWorker: string[] }) => m.missingOnWorker,
    );
    expect(missing).toContain('worker:cpu-speed-all>=100000');
  });

  it('a score out of bounds is refused with the field named, and nothing is written', async () => {
    const before = await t.sql<{ dynamic_metadata: unknown }>(
      `select dynamic_metadata from worker where name = 'fast'`,
    );
    const d = await t.gql(
      `mutation { registerWorker(input: { name: "bad-speed", staticMetadata: { cpuSpeed: -5 } }) { __typename ... on InputError { problems { path message } } } }`,
    );
    expect(d.errors).toBeUndefined();
    expect(d.data!.registerWorker.__typename).toBe('InputError');
    expect(JSON.stringify(d.data!.registerWorker.problems)).toContain('cpuSpeed');
    expect(await t.sql(`select 1 from worker where name = 'bad-speed'`)).toEqual([]);
    expect(await t.sql(`select dynamic_metadata from worker where name = 'fast'`)).toEqual(before);
  });
});
