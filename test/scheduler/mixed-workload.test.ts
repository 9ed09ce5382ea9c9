/**
 * One mixed workload on one farm, scheduled three ways in simulated time by the real scheduler (its
 * pass, on PostgreSQL, at each simulated instant): hosts with fixed slots (concurrency 8 and 4) and
 * hosts that share their resources. Six hosts of 16 CPUs and 64 GiB; over four hours, 240 small builds
 * (2 CPUs, 4 GiB, 5 to 15 minutes on 2 CPUs) and 16 large ones (16 CPUs, 48 GiB, an hour on 16 CPUs)
 * arrive in a random order. A run gets the CPUs it reserves on a sharing host, and its slot's share of
 * the host (16 / concurrency) on a slotted one; a build runs for its CPU-seconds over the CPUs it may use
 * (at most the ones it asks for). Measured: the makespan, the utilisation (the CPU-time the builds use
 * over the farm's CPU-time until the last one ends), the longest wait of a large build from its
 * submission to its start and the longest from its submission to its end. Asserted: sharing uses the farm better than either slotted farm, every large
 * build starts, and none waits longer on the sharing farm than the longest a reservation holds a host
 * plus the longest run (no large build starves behind the stream of small ones).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Random } from '../../bench/prng.js';
import { useTestApp } from '../helpers/app.js';
import {
  CONTENDED,
  classifyPending,
  contendedWorkers,
  insertPending,
  resetScheduling,
  seedScheduling,
} from '../helpers/scheduler-fixtures.js';
import { runPass } from '../../src/scheduler/storage/pass.js';
import { intArray } from '../../src/storage/db/arrays.js';
import { RESERVATION_DEFAULTS } from '../../src/scheduler/rules/resources.js';

const t = useTestApp();

afterEach(async () => {
  await t.sql('delete from worker_reservation');
  await resetScheduling(t);
});

/** The fixtures' base time: requests are created at it plus their arrival, and the clock starts there. */
const EPOCH = Date.parse('2026-01-01T00:00:00Z');
const HOSTS = 6;
const HOST_CPUS = 16;
const HOUR = 3600;

interface Job {
  readonly key: string;
  readonly big: boolean;
  readonly cpus: number;
  readonly memoryGib: number;
  /** Its work in CPU-seconds. */
  readonly work: number;
  /** Seconds after the start of the simulation. */
  readonly arrival: number;
}

function workload(seed: number): Job[] {
  const rnd = new Random(seed);
  const jobs: Job[] = [];
  for (let i = 0; i < 240; i++)
    jobs.push({ key: `small-${i}`, big: false, cpus: 2, memoryGib: 4, work: 2 * rnd.int(300, 900), arrival: 0 });
  for (let i = 0; i < 16; i++)
    jobs.push({ key: `big-${i}`, big: true, cpus: 16, memoryGib: 48, work: 16 * HOUR, arrival: 0 });
  // A random order of arrival, evenly over four hours.
  for (let i = jobs.length - 1; i > 0; i--) {
    const j = rnd.int(0, i);
    [jobs[i], jobs[j]] = [jobs[j], jobs[i]];
  }
  return jobs.map((job, i) => ({ ...job, arrival: Math.floor((i * 4 * HOUR) / jobs.length) }));
}

interface Outcome {
  makespanSeconds: number;
  utilisation: number;
  longestBigWaitSeconds: number;
  /** The longest time from a large build's submission to its end. */
  longestBigTurnaroundSeconds: number;
  started: number;
}

/** Runs the workload on a farm of hosts with `concurrency` slots, or sharing their resources (null). */
async function simulate(jobs: readonly Job[], concurrency: number | null): Promise<Outcome> {
  const workers = contendedWorkers('sim', HOSTS, concurrency ?? 16);
  await seedScheduling(t, { workers, requests: [] });
  if (concurrency === null)
    await t.sql(
      `update worker set offers_resources = true, offered_cpus = ?, offered_memory_mib = ?, offered_disk_mib = ?`,
      [HOST_CPUS, 64 * 1024, 1024 * 1024],
    );
  // The history the reservations and backfill read: the small builds' median run, the large ones'.
  await t.sql(
    `insert into task_duration (task_type, task_name, day, runs, seconds)
     values ('worker', 'small', current_date - 1, 1, 600), ('worker', 'big', current_date - 1, 1, 3600)`,
  );
  const byId = new Map<number, Job>();
  const ends = new Map<number, number>(); // running request → its end, in simulated seconds
  const waits: number[] = [];
  const turnarounds: number[] = [];
  let next = 0;
  let clock = 0;
  let started = 0;
  for (;;) {
    const upcoming = [...(next < jobs.length ? [jobs[next].arrival] : []), ...ends.values()];
    if (!upcoming.length) break;
    clock = Math.min(...upcoming);
    const now = new Date(EPOCH + clock * 1000);
    const done = [...ends].filter(([, end]) => end <= clock).map(([id]) => id);
    if (done.length) {
      await t.sql(`update work_request set status = 'COMPLETED', completed_at = ? where id = any(?::int[])`, [
        now,
        intArray(done),
      ]);
      for (const id of done) ends.delete(id);
    }
    const arriving: Job[] = [];
    while (next < jobs.length && jobs[next].arrival <= clock) arriving.push(jobs[next++]);
    if (arriving.length) {
      const ids = await insertPending(
        t,
        t.app.orm.em.fork(),
        arriving.map((j) => ({
          key: j.key,
          providedTags: [],
          requiredTags: CONTENDED.classes[0],
          priorityBase: 0,
          priorityAdjustment: 0,
          createdAtSeconds: j.arrival,
        })),
      );
      for (const j of arriving) {
        const id = ids.get(j.key)!;
        byId.set(id, j);
        await t.sql(
          `update work_request set task_name = ?, reserved_cpus = ?, reserved_memory_mib = ?, reserved_disk_mib = 0,
                  pending_at = ? where id = ?`,
          [j.big ? 'big' : 'small', j.cpus, j.memoryGib * 1024, now, id],
        );
      }
      await t.app.orm.em.fork().transactional((tx) => classifyPending(tx));
    }
    // The hosts are alive now, as their heartbeats would keep them.
    await t.sql(`update worker set last_seen_at = ?, metadata_reported_at = ?`, [now, now]);
    await t.app.orm.em
      .fork()
      .transactional((tx) => runPass(tx, t.app.scheduler.classes, t.app.scheduler.history, t.app.config.workers, now));
    const assigned = await t.sql<{ id: number }>(
      `update work_request set status = 'RUNNING', started_at = ? where status = 'ASSIGNED' returning id`,
      [now],
    );
    for (const { id } of assigned) {
      const job = byId.get(id)!;
      const cpus = Math.min(job.cpus, concurrency === null ? job.cpus : HOST_CPUS / concurrency);
      ends.set(id, clock + Math.ceil(job.work / cpus));
      if (job.big) {
        waits.push(clock - job.arrival);
        turnarounds.push(ends.get(id)! - job.arrival);
      }
      started++;
    }
  }
  const work = jobs.reduce((s, j) => s + j.work, 0);
  return {
    makespanSeconds: clock,
    utilisation: work / (HOSTS * HOST_CPUS * clock),
    longestBigWaitSeconds: Math.max(...waits),
    longestBigTurnaroundSeconds: Math.max(...turnarounds),
    started,
  };
}

describe('a mixed workload: fixed slots against shared resources', () => {
  // Some 800 passes and their writes, three times: seconds alone, longer beside the other test files.
  it(
    'sharing the hosts uses the farm better, and no large build starves behind the small ones',
    { timeout: 300_000 },
    async () => {
      const jobs = workload(20261203);
      const results: Record<string, Outcome> = {};
      for (const [name, concurrency] of [
        ['fixed slots, concurrency 8', 8],
        ['fixed slots, concurrency 4', 4],
        ['shared resources', null],
      ] as const) {
        results[name] = await simulate(jobs, concurrency);
        await t.sql('delete from worker_reservation');
        await resetScheduling(t);
      }
      const lines = Object.entries(results).map(
        ([name, r]) =>
          `${name}: makespan ${(r.makespanSeconds / HOUR).toFixed(2)} h, utilisation ${(100 * r.utilisation).toFixed(1)}%, ` +
          `a large build's longest wait ${(r.longestBigWaitSeconds / 60).toFixed(0)} min, ` +
          `longest from submission to end ${(r.longestBigTurnaroundSeconds / HOUR).toFixed(2)} h`,
      );
      process.stdout.write(`${lines.join('\n')}\n`);
      const shared = results['shared resources'];
      for (const r of Object.values(results)) expect(r.started).toBe(jobs.length);
      expect(shared.utilisation).toBeGreaterThan(results['fixed slots, concurrency 8'].utilisation);
      expect(shared.utilisation).toBeGreaterThan(results['fixed slots, concurrency 4'].utilisation);
      expect(shared.longestBigWaitSeconds).toBeLessThanOrEqual(RESERVATION_DEFAULTS.maxSeconds + HOUR);
      // On slotted hosts a large build starts at once in a free slot but runs on its slot's share of the host.
      expect(shared.longestBigTurnaroundSeconds).toBeLessThan(
        results['fixed slots, concurrency 4'].longestBigTurnaroundSeconds,
      );
    },
  );
});
