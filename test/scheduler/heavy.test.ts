/**
 * Heavy work by the task's history (docs/design.md: placement quality): a request whose task ran at least
 * TAGSCHED_HEAVY_TASK_SECONDS on average over the last 30 days goes to the largest free worker, as one
 * that requires worker:class:large does; other work to the smallest. Through GraphQL on the real
 * database: the placement of a new request, and passes.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/core/config/config.js';
import { ConfigError } from '../../src/core/config/variables.js';
import { runPass } from '../../src/scheduler/storage/pass.js';
import { TaskHistoryCache } from '../../src/scheduler/storage/task-history.js';
import { useTestApp } from '../helpers/app.js';
import { connectedWorker, createWorkspace, submitOk } from '../helpers/fixtures.js';
import { inRollback, resetScheduling, holderOf, abortAllActive } from '../helpers/scheduler-fixtures.js';

// Automatic scheduling on, so that a new request is placed at once, but no pass runs by itself (the
// debounce and the interval are an hour, and app.start() is never called). The threshold is the default.
const t = useTestApp({ scheduler: { automatic: true, passDebounceMs: 3_600_000, passIntervalMs: 3_600_000 } });

const GIB = 1024 ** 3;

/** A connected amd64 worker of that size that runs sbuild and noop and provides worker:class:large. */
async function machine(name: string, cpuCount: number, memoryGib: number): Promise<void> {
  await connectedWorker(
    t,
    name,
    { staticMetadata: { providedTags: ['worker:class:large'] } },
    {
      architectures: ['amd64'],
      cpuCount,
      totalPhysicalMemory: memoryGib * GIB,
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

/** The task ran `seconds` on average, `daysAgo` days ago (the totals completions keep per task and day). */
async function ran(taskName: string, seconds: number, daysAgo = 1): Promise<void> {
  await t.sql(
    `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', ?, current_date - ?::int, 2, ?)`,
    [taskName, daysAgo, 2 * seconds],
  );
}

const SBUILD = {
  workspace: 'heavy/main',
  taskType: 'worker',
  taskName: 'sbuild',
  taskData: { source_package: 'hello', host_architecture: 'amd64' },
};
const NOOP = { workspace: 'heavy/main', taskType: 'worker', taskName: 'noop', taskData: {} };

const submitted = async (input: Record<string, unknown>) => (await submitOk(t, input)).id as string;

const holder = (id: string) => holderOf(t, id);
const freeAll = () => abortAllActive(t);

beforeEach(async () => {
  await resetScheduling(t);
  t.app.scheduler.history.forget();
  await createWorkspace(t, 'heavy/main').catch(() => undefined); // the first test creates it
  // The large worker first (a lower id): the oldest-first rule alone would pick it.
  await machine('large', 32, 64);
  await machine('small', 4, 8);
});

describe('heavy work by the task history (docs/design.md: placement quality)', () => {
  it('on submission: a task that ran for two hours on average goes to the largest free worker, one that ran a minute to the smallest', async () => {
    await ran('sbuild', 7200);
    await ran('noop', 60);
    expect(await holder(await submitted(SBUILD))).toBe('large');
    await freeAll();
    expect(await holder(await submitted(NOOP))).toBe('small');
  });

  it('in a pass: requests that waited go the same way; the heavy one, first in the queue, leaves the small worker to the light one', async () => {
    await ran('sbuild', 7200);
    await ran('noop', 60);
    await t.sql(`update worker set enabled = false`); // nothing is placed on submission
    const heavy = await submitted(SBUILD); // first in the queue: as light work it would take the small worker
    const light = await submitted(NOOP);
    await t.sql(`update worker set enabled = true`);
    const assigned = await t.app.scheduler.runPass();
    expect(assigned).toHaveLength(2);
    expect({ light: await holder(light), heavy: await holder(heavy) }).toEqual({ light: 'small', heavy: 'large' });
  });

  it('the threshold, TAGSCHED_HEAVY_TASK_SECONDS (default an hour): below it light work, at it heavy; the averages are kept a minute', async () => {
    expect(t.app.config.statistics.heavyTaskSeconds).toBe(3600);
    await t.sql(
      `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', 'noop', current_date, 1, 3599)`,
    );
    expect(await holder(await submitted(NOOP))).toBe('small');
    await freeAll();
    await t.sql(`update task_duration set seconds = 3600`);
    // The process read the averages a moment ago: until it reads them again, noop is still light work.
    expect(await holder(await submitted(NOOP))).toBe('small');
    await freeAll();
    t.app.scheduler.history.forget();
    expect(await holder(await submitted(NOOP))).toBe('large');
  });

  it('the setting is read once from the environment; 0 turns history off', async () => {
    expect(loadConfig({}).statistics.heavyTaskSeconds).toBe(3600);
    expect(loadConfig({ TAGSCHED_HEAVY_TASK_SECONDS: '7200' }).statistics.heavyTaskSeconds).toBe(7200);
    expect(() => loadConfig({ TAGSCHED_HEAVY_TASK_SECONDS: 'long' })).toThrow(ConfigError);
    await ran('noop', 7200);
    await t.sql(`update worker set enabled = false`);
    const id = await submitted(NOOP);
    await t.sql(`update worker set enabled = true`);
    const pass = (thresholdSeconds: number) =>
      inRollback(t, (tx) =>
        runPass(tx, t.app.scheduler.classes, new TaskHistoryCache(thresholdSeconds), t.app.config.workers, new Date()),
      );
    const [{ id: largeId }, { id: smallId }] = await t.sql<{ id: number }>(`select id from worker order by name`);
    expect((await pass(3600)).map((a) => [String(a.workRequestId), a.workerId])).toEqual([[id, largeId]]);
    expect((await pass(0)).map((a) => [String(a.workRequestId), a.workerId])).toEqual([[id, smallId]]);
  });

  it('without history, or with only runs older than 30 days, the size class decides: worker:class:large is heavy, the rest light', async () => {
    await ran('noop', 1_000_000, 40);
    expect(await holder(await submitted(NOOP))).toBe('small');
    await freeAll();
    expect(await holder(await submitted({ ...NOOP, requiredTags: ['worker:class:large'] }))).toBe('large');
  });
});
