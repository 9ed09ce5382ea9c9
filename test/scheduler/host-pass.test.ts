/**
 * The pass over workers that share their resources (scheduler/storage/host-pass.ts) takes, in bulk,
 * exactly what each worker's own pulls would take one after another in the order of their ids
 * (storage/host-pull.ts: assignOnHost): the same requests to the same workers and the same reservations
 * left behind, on generated farms with running work, histories, reservations in force and lapsed,
 * backoffs and more requests than the workers take.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Random } from '../../bench/prng.js';
import { useTestApp } from '../helpers/app.js';
import {
  CONTENDED,
  contendedWorkers,
  inRollback,
  resetScheduling,
  seedScheduling,
  type RequestRow,
} from '../helpers/scheduler-fixtures.js';
import { runPass } from '../../src/scheduler/storage/pass.js';
import { assignOnHost } from '../../src/scheduler/storage/host-pull.js';
import { freeSlots } from '../../src/scheduler/rules/active-work.js';

const t = useTestApp();

afterEach(async () => {
  await t.sql('delete from worker_reservation');
  await t.sql('delete from release_backoff');
  await resetScheduling(t);
});

interface Outcome {
  assignments: string[];
  reservations: string[];
  over: number;
}

/** What the database holds after the pass: the assignments made at `now`, the reservation rows, over-committed workers. */
async function outcome(tx: EntityManager, now: Date): Promise<Outcome> {
  const a = await tx.execute<{ id: number; worker_id: number }[]>(
    `select id, worker_id from work_request where assigned_at = ? order by id`,
    [now],
  );
  const r = await tx.execute<{ w: number; q: number; lapsed: boolean; starts: string }[]>(
    `select worker_id as w, work_request_id as q, lapsed_at is not null as lapsed, starts_at::text as starts
       from worker_reservation order by worker_id`,
  );
  const [{ n }] = await tx.execute<{ n: number }[]>(
    `select count(*)::int as n from worker w
      where w.offers_resources and exists (
        select 1 from work_request h where h.worker_id = w.id and h.status in ('ASSIGNED', 'RUNNING')
        group by h.worker_id
        having sum(h.reserved_cpus) > w.offered_cpus or sum(h.reserved_memory_mib) > w.offered_memory_mib
            or sum(h.reserved_disk_mib) > w.offered_disk_mib)`,
  );
  return {
    assignments: a.map((x) => `${x.id}->${x.worker_id}`),
    reservations: r.map((x) => `${x.w}:${x.q}${x.lapsed ? ' lapsed' : ''} ${x.starts}`),
    over: n,
  };
}

/** Each sharing worker in id order pulls (assignOnHost) until it takes nothing or is full. */
async function pullEachHost(tx: EntityManager, now: Date): Promise<void> {
  const cache = t.app.scheduler.classes;
  await cache.refresh(tx);
  const durations = await t.app.scheduler.history.get(tx, now);
  const hosts = await tx.execute<
    {
      id: number;
      type: string;
      concurrency: number;
      provided_tags: string[];
      required_tags: string[];
      cpus: number;
      mem: number;
      disk: number;
      active: number;
    }[]
  >(
    `select w.id, w.type, w.concurrency, to_json(w.provided_tags) as provided_tags, to_json(w.required_tags) as required_tags,
            w.offered_cpus as cpus, w.offered_memory_mib as mem, w.offered_disk_mib as disk,
            (select count(*)::int from work_request a where a.worker_id = w.id and a.status in ('ASSIGNED', 'RUNNING')) as active
       from worker w where w.offers_resources order by w.id for update`,
  );
  for (const h of hosts) {
    const eligible = cache.eligibleFor({ type: h.type, providedTags: h.provided_tags, requiredTags: h.required_tags });
    if (!eligible.length) continue;
    for (let free = freeSlots(h.concurrency, h.active); free > 0; free--) {
      const offered = { cpus: h.cpus, memoryMib: h.mem, diskMib: h.disk };
      if (!(await assignOnHost(tx, { id: h.id, offered }, eligible, now, durations))) break;
    }
  }
}

/** A farm of `hosts` sharing workers and `requests` pending ones, from the seed. */
async function seedFarm(seed: number, hosts: number, requests: number): Promise<void> {
  const rnd = new Random(seed);
  const workers = contendedWorkers(`h${seed}`, hosts, 1).map((w) => ({
    ...w,
    concurrency: rnd.int(2, 8),
    active: rnd.int(0, 2),
  }));
  const pending: RequestRow[] = Array.from({ length: requests }, (_, i) => ({
    key: `task-${seed}-${i % 7}`,
    providedTags: [],
    requiredTags: rnd.pick(CONTENDED.classes),
    priorityBase: rnd.chance(0.2) ? 10 : 0,
    priorityAdjustment: 0,
    createdAtSeconds: rnd.int(0, requests / 2), // ties on purpose
  }));
  const seeded = await seedScheduling(t, { workers, requests: pending });
  const ids = [...seeded.workerIds.values()].sort((a, b) => a - b);
  for (const id of ids)
    await t.sql(
      `update worker set offers_resources = true, offered_cpus = ?, offered_memory_mib = ?, offered_disk_mib = ? where id = ?`,
      [rnd.pick([4, 8, 16]), rnd.pick([8, 16, 32]) * 1024, rnd.pick([50, 100]) * 1024, id],
    );
  // What each request reserves: the running work 1 CPU and 1 GiB; pending ones mostly small, some large
  // enough to need a whole host.
  await t.sql(
    `update work_request set reserved_cpus = 1, reserved_memory_mib = 1024, reserved_disk_mib = 0 where status <> 'PENDING'`,
  );
  for (const id of await t.sql<{ id: number }>(`select id from work_request where status = 'PENDING' order by id`))
    await t.sql(
      `update work_request set reserved_cpus = ?, reserved_memory_mib = ?, reserved_disk_mib = ? where id = ?`,
      [
        rnd.chance(0.15) ? rnd.pick([8, 12, 16]) : rnd.int(0, 3),
        rnd.chance(0.15) ? rnd.pick([12, 24]) * 1024 : rnd.int(0, 4) * 1024,
        rnd.int(0, 20) * 1024,
        id.id,
      ],
    );
  // Histories for some tasks (backfill counts on those), one for the running noop work.
  for (let k = 0; k < 7; k++)
    if (rnd.chance(0.6))
      await t.sql(
        `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', ?, current_date - 1, 1, ?)`,
        [`task-${seed}-${k}`, rnd.pick([30, 300, 3600, 20000])],
      );
  await t.sql(
    `insert into task_duration (task_type, task_name, day, runs, seconds) values ('worker', 'noop', current_date - 1, 1, ?)`,
    [rnd.pick([60, 7200])],
  );
  // Reservations: some in force, one lapsed; backoffs of some requests from some workers.
  const pendingIds = (
    await t.sql<{ id: number }>(`select id from work_request where status = 'PENDING' order by id`)
  ).map((r) => r.id);
  const reserved = new Set<number>();
  for (const w of ids) {
    if (!rnd.chance(0.3)) continue;
    const q = rnd.pick(pendingIds);
    if (reserved.has(q)) continue;
    const lapsed = rnd.chance(0.25);
    if (!lapsed) reserved.add(q);
    await t.sql(
      `insert into worker_reservation (worker_id, work_request_id, reserved_at, starts_at, lapsed_at)
       values (?, ?, now() - interval '10 minutes', now() + interval '1 hour', ${lapsed ? `now() - interval '1 minute'` : 'null'})`,
      [w, q],
    );
  }
  for (let i = 0; i < pendingIds.length / 10; i++)
    await t.sql(
      `insert into release_backoff (work_request_id, worker_id, until) values (?, ?, now() + interval '1 hour') on conflict do nothing`,
      [rnd.pick(pendingIds), rnd.pick(ids)],
    );
}

describe('the pass over workers that share their resources', () => {
  for (const [seed, hosts, requests] of [
    [1, 6, 40],
    [2, 12, 120],
    [3, 4, 300],
    [4, 20, 60],
    [5, 10, 200],
  ] as const)
    it(`takes what each worker's own pulls would, in bulk (seed ${seed}: ${hosts} hosts, ${requests} requests)`, async () => {
      await seedFarm(seed, hosts, requests);
      const now = new Date();
      const { config } = t.app;
      const bulk = await inRollback(t, async (tx) => {
        await runPass(tx, t.app.scheduler.classes, t.app.scheduler.history, config.workers, now);
        return outcome(tx, now);
      });
      const pulled = await inRollback(t, async (tx) => {
        await pullEachHost(tx, now);
        return outcome(tx, now);
      });
      expect(pulled.assignments.length).toBeGreaterThan(0);
      expect(bulk.over).toBe(0);
      expect(bulk).toEqual(pulled);
    });

  it('reads further into a class when the first read does not cover a worker (more backed-off heads than read)', async () => {
    await seedFarm(9, 2, 1);
    const ids = (await t.sql<{ id: number }>(`select id from worker order by id`)).map((r) => r.id);
    // One class, 60 requests, every one but the last backed off from both workers: the first read (a window's
    // worth and one per free slot) sees none it may take.
    await t.sql(
      `update worker set concurrency = 1, offered_cpus = 4, offered_memory_mib = 4096, offered_disk_mib = 4096`,
    );
    await t.sql(`delete from work_request where status = 'PENDING'`);
    await t.sql(`delete from work_request where status <> 'PENDING'`);
    const rows: RequestRow[] = Array.from({ length: 60 }, (_, i) => ({
      key: `deep-${i}`,
      providedTags: [],
      requiredTags: CONTENDED.classes[0],
      priorityBase: 0,
      priorityAdjustment: 0,
      createdAtSeconds: i,
    }));
    await seedScheduling(t, { workers: [], requests: rows });
    const pending = (
      await t.sql<{ id: number }>(`select id from work_request where status = 'PENDING' order by id`)
    ).map((r) => r.id);
    await t.sql(`update work_request set reserved_cpus = 1, reserved_memory_mib = 0, reserved_disk_mib = 0`);
    for (const q of pending.slice(0, -2))
      for (const w of ids)
        await t.sql(
          `insert into release_backoff (work_request_id, worker_id, until) values (?, ?, now() + interval '1 hour')`,
          [q, w],
        );
    const now = new Date();
    const made = await inRollback(t, async (tx) => {
      const a = await runPass(tx, t.app.scheduler.classes, t.app.scheduler.history, t.app.config.workers, now);
      return a.map((x) => [x.workRequestId, x.workerId]);
    });
    expect(made).toEqual([
      [pending.at(-2), ids[0]],
      [pending.at(-1), ids[1]],
    ]);
  });
});
