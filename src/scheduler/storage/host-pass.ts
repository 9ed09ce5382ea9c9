/**
 * The pass over the workers that share their resources, in bulk (docs/reference/resources.md): the
 * workers' rows locked by the caller, what each holds and its reservation read in one statement each,
 * the heads of the classes they may run read per class and matched in memory as each worker's own pulls
 * would take them one after another (matching/host-pass-matching.ts), then the chosen requests locked
 * (SKIP LOCKED), assigned in one statement, checked against the offers by the rule's SQL form
 * (rules/resources.ts: overCommittedBySql; a failed check undoes the pass) and the reservations written.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, timestampArray, toDate } from '../../storage/db/arrays.js';
import { HostPassMatching, type HostHead, type PassHost, type ReservationRow } from '../matching/host-pass-matching.js';
import { isActiveSql } from '../rules/active-work.js';
import { effectivePrioritySql, headsOrderSql, queueOrderSql } from '../rules/queue-order.js';
import { overCommittedBySql, RESERVATION_DEFAULTS, type Resources } from '../rules/resources.js';
import { assignRequests, type Assignment } from './assign.js';
import { LOCK_ALL_SQL } from './queue-heads.js';
import { backoffsOf } from './release-backoffs.js';
import type { ReservationSettings } from './host-pull.js';
import { expectedDurationSeconds, knownDurationSeconds, type DurationHistory } from './task-history.js';

/**
 * Heads read per class at first, at most (fewer when its workers have fewer free slots): a class read to
 * its limit is read further, twice as many each time up to HEADS_PER_READ, when a worker needs more of it.
 */
const FIRST_READ = 32;
const HEADS_PER_READ = 1024;

/** A worker that shares its resources as the pass reads it (its row locked by the caller). */
export interface HostRow {
  readonly id: number;
  readonly offered: Resources;
  readonly freeSlots: number;
  readonly eligible: readonly number[];
}

type Row = Record<string, unknown>;
const resourcesOf = (r: Row): Resources => ({
  cpus: Number(r.reserved_cpus),
  memoryMib: Number(r.reserved_memory_mib),
  diskMib: Number(r.reserved_disk_mib),
});

/** The columns of a request read as a head: its queue key (exact, as text), class, what it reserves and its task. */
const HEAD_COLUMNS = (
  w: string,
) => `${w}.id, ${w}.class_id, ${effectivePrioritySql(w)} as prio, ${w}.fair_key::text as fair_key,
  (extract(epoch from ${w}.created_at) * 1000000)::bigint::text as created_us, ${w}.reserved_cpus, ${w}.reserved_memory_mib,
  ${w}.reserved_disk_mib, ${w}.task_type, ${w}.task_name`;

/** Pending heads of each class, class by class in queue order: parameters the classes, how many and how many to skip. */
const HEADS_SQL = `
  select t.* from unnest(?::int[], ?::int[], ?::int[]) as c(id, lim, skip)
   cross join lateral (
     select ${HEAD_COLUMNS('w')}, w.created_at
       from work_request w
      where w.status = 'PENDING' and w.class_id = c.id
      order by ${queueOrderSql('w')}
      limit c.lim offset c.skip
   ) t
   order by t.class_id, ${headsOrderSql('t')}`;

/** Assigns to the workers `hosts` what their pulls would take, at most `maxAssignments` in all. */
export async function passOverHosts(
  em: EntityManager,
  hosts: readonly HostRow[],
  durations: DurationHistory,
  now: Date,
  maxAssignments: number,
  settings: ReservationSettings = RESERVATION_DEFAULTS,
): Promise<Assignment[]> {
  if (!hosts.length || maxAssignments <= 0) return [];
  const ids = hosts.map((h) => h.id);
  const headOf = (r: Row): HostHead => ({
    id: Number(r.id),
    classId: Number(r.class_id),
    prio: Number(r.prio),
    fairKey: Number(r.fair_key),
    createdUs: Number(r.created_us),
    reserved: resourcesOf(r),
    expectedSeconds: knownDurationSeconds(durations, String(r.task_type), String(r.task_name)),
    runSeconds: expectedDurationSeconds(durations, String(r.task_type), String(r.task_name)),
  });
  const held = await em.execute<Row[]>(
    `select a.worker_id, a.reserved_cpus, a.reserved_memory_mib, a.reserved_disk_mib, a.task_type, a.task_name,
            coalesce(a.started_at, a.assigned_at) as since
       from work_request a where a.worker_id = any(?::int[]) and ${isActiveSql('a')}`,
    [intArray(ids)],
  );
  const running = new Map<number, PassHost['running'][number][]>();
  for (const r of held) {
    const since = toDate(r.since as Date | string | null) ?? now;
    const runFor = expectedDurationSeconds(durations, String(r.task_type), String(r.task_name));
    const list = running.get(Number(r.worker_id)) ?? [];
    list.push({ reserved: resourcesOf(r), expectedEndAt: new Date(since.getTime() + runFor * 1000) });
    running.set(Number(r.worker_id), list);
  }
  // Every reservation in force (one per worker at most: a small table), and the rows of these workers with their requests.
  const inForce = await em.execute<{ work_request_id: number; worker_id: number }[]>(
    `select work_request_id, worker_id from worker_reservation where lapsed_at is null`,
  );
  const stored = await em.execute<Row[]>(
    `select r.worker_id, r.work_request_id, r.reserved_at, r.starts_at, r.lapsed_at, q.status, ${HEAD_COLUMNS('q')}
       from worker_reservation r join work_request q on q.id = r.work_request_id
      where r.worker_id = any(?::int[])`,
    [intArray(ids)],
  );
  const reservationOf = new Map<number, ReservationRow>(
    stored.map((r) => [
      Number(r.worker_id),
      {
        workRequestId: Number(r.work_request_id),
        reservedAt: toDate(r.reserved_at as Date | string)!,
        startsAt: toDate(r.starts_at as Date | string)!,
        lapsedAt: toDate(r.lapsed_at as Date | string | null),
      },
    ]),
  );
  const matching = new HostPassMatching({
    hosts: hosts.map((h) => ({
      ...h,
      running: running.get(h.id) ?? [],
      reservation: reservationOf.get(h.id) ?? null,
    })),
    now,
    maxAssignments,
    safetyFactor: settings.safetyFactor,
    maxSeconds: settings.maxSeconds,
    reservedBy: new Map(inForce.map((r) => [Number(r.work_request_id), Number(r.worker_id)])),
    reservedHeads: stored.filter((r) => r.status === 'PENDING').map(headOf),
  });
  const read = async (limits: Map<number, number>) => {
    const classes = [...limits.keys()];
    const rows = await em.execute<Row[]>(HEADS_SQL, [
      intArray(classes),
      intArray(classes.map((c) => limits.get(c)!)),
      intArray(classes.map((c) => matching.readCount(c))),
    ]);
    const heads = rows.map(headOf);
    const backoffs = await backoffsOf(
      em,
      heads.map((h) => h.id),
      now,
    );
    const byClass = new Map<number, HostHead[]>(classes.map((c) => [c, []]));
    for (const h of heads) byClass.get(h.classId)!.push(h);
    for (const [c, list] of byClass) matching.addHeads(c, list, backoffs, list.length < limits.get(c)!);
  };
  await read(matching.initialReads(FIRST_READ));
  for (let needs = matching.run(); needs.length; needs = matching.run())
    await read(new Map(needs.map((c) => [c, Math.min(HEADS_PER_READ, Math.max(FIRST_READ, matching.readCount(c)))])));
  return writeAnswer(em, matching, now);
}

/** Locks the chosen requests, assigns those still pending, checks the offers and writes the reservations. */
async function writeAnswer(em: EntityManager, matching: HostPassMatching, now: Date): Promise<Assignment[]> {
  const pairs = matching.answer.flatMap((r) => r.take.map((id) => ({ workRequestId: id, workerId: r.workerId })));
  let made: Assignment[] = [];
  if (pairs.length) {
    const locked = new Set(
      (await em.execute<{ id: number }[]>(LOCK_ALL_SQL, [intArray(pairs.map((p) => p.workRequestId))])).map((r) =>
        Number(r.id),
      ),
    );
    made = await assignRequests(
      em,
      pairs.filter((p) => locked.has(p.workRequestId)),
      now,
    );
  }
  if (made.length) {
    const workers = [...new Set(made.map((a) => a.workerId))];
    const over = await em.execute<{ id: number }[]>(
      `select w.id from worker w where w.id = any(?::int[]) and ${overCommittedBySql('w')}`,
      [intArray(workers), intArray(made.map((a) => a.workRequestId))],
    );
    // The workers' rows are locked and every assignment to them is counted in the matching, so this holds;
    // were it ever not to, the pass is undone rather than a worker over-committed.
    if (over.length) throw new Error(`the pass would over-commit worker(s) ${over.map((r) => r.id).join(', ')}`);
  }
  const changed = matching.answer.filter((r) => r.changed);
  if (changed.length) {
    await em.execute(`delete from worker_reservation where worker_id = any(?::int[])`, [
      intArray(changed.map((r) => r.workerId)),
    ]);
    const rows = changed.flatMap((r) => (r.reservation ? [{ workerId: r.workerId, ...r.reservation }] : []));
    // Another process's pull may have reserved one of these requests meanwhile: then that worker holds it.
    if (rows.length)
      await em.execute(
        `insert into worker_reservation (worker_id, work_request_id, reserved_at, starts_at, lapsed_at)
         select * from unnest(?::int[], ?::int[], ?::timestamptz[], ?::timestamptz[], ?::timestamptz[])
         on conflict (work_request_id) where lapsed_at is null do nothing`,
        [
          intArray(rows.map((r) => r.workerId)),
          intArray(rows.map((r) => r.workRequestId)),
          timestampArray(rows.map((r) => r.reservedAt)),
          timestampArray(rows.map((r) => r.startsAt)),
          timestampArray(rows.map((r) => r.lapsedAt)),
        ],
      );
  }
  return made;
}
