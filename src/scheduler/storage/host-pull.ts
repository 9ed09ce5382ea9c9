/**
 * The pull of a worker that shares its resources (docs/reference/resources.md): what it holds, its
 * reservation and the heads of the classes it may run, read under its row lock; the choice made in
 * memory (matching/host-choice.ts, on the rules of rules/resources.ts); the reservation written and the
 * first chosen request not locked elsewhere assigned, under the SQL form of the fit (fitsResourcesSql),
 * so that no statement can over-commit the worker. A worker's own pull and a placement (next-work.ts:
 * assignNextWork) come here; the pass takes what these pulls would in bulk (host-pass.ts). Each holds the
 * worker's row lock, so one worker's assignments are made one after another.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, toDate } from '../../storage/db/arrays.js';
import { HOST_HEADS, HOST_HEADS_PER_CLASS } from '../matching/host-pass-matching.js';
import { chooseOnHost, type HostCandidate, type HostChoice, type StoredReservation } from '../matching/host-choice.js';
import { isActiveSql } from '../rules/active-work.js';
import {
  headsOrderSql,
  queueBefore,
  queueOrderSql,
  effectivePrioritySql,
  type QueueKey,
} from '../rules/queue-order.js';
import { notBackedOffParams, notBackedOffSql } from '../rules/release-backoff.js';
import { fitsResourcesSql, RESERVATION_DEFAULTS, type Resources, type RunningWork } from '../rules/resources.js';
import { assignSql, type NextAssignment } from './assign.js';
import {
  DEFAULT_EXPECTED_SECONDS,
  expectedDurationSeconds,
  knownDurationSeconds,
  type DurationHistory,
} from './task-history.js';

/** A worker that shares its resources, as its pull needs it (read under its lock by the caller). */
export interface HostWorker {
  readonly id: number;
  readonly offered: Resources;
}

/** The settings of the reservations (RESERVATION_DEFAULTS unless a test or the configuration says otherwise). */
export interface ReservationSettings {
  readonly safetyFactor: number;
  readonly maxSeconds: number;
}

type Row = Record<string, unknown>;
const resourcesOf = (r: Row): Resources => ({
  cpus: Number(r.reserved_cpus),
  memoryMib: Number(r.reserved_memory_mib),
  diskMib: Number(r.reserved_disk_mib),
});

/** The heads of the classes not backed off from the worker, with what each reserves and its task; parameters: classes, notBackedOffParams, heads per class, heads in all. */
const HOST_HEADS_SQL = `
  select t.* from unnest(?::int[]) as c(id)
   cross join lateral (
     select w.id, ${effectivePrioritySql('w')} as prio, w.fair_key, w.created_at,
            (extract(epoch from w.created_at) * 1000000)::bigint::text as created_us, w.reserved_cpus, w.reserved_memory_mib,
            w.reserved_disk_mib, w.task_type, w.task_name
       from work_request w
      where w.status = 'PENDING' and w.class_id = c.id and ${notBackedOffSql('w')}
      order by ${queueOrderSql('w')}
      limit ?
   ) t
   order by ${headsOrderSql('t')}
   limit ?`;

/**
 * What the choice reads, in one statement (parameters: the worker twice, then those of HOST_HEADS_SQL,
 * then the worker): the worker's active work, its reservation row with its request, the
 * heads, and which of the heads and that request hold another worker's reservation in force, each as JSON.
 */
const READ_HOST_SQL = `
  with held as (
    select a.reserved_cpus, a.reserved_memory_mib, a.reserved_disk_mib, a.task_type, a.task_name,
           coalesce(a.started_at, a.assigned_at) as since
      from work_request a where a.worker_id = ? and ${isActiveSql('a')}
  ), stored as (
    select r.work_request_id, r.reserved_at, r.lapsed_at, q.status, q.reserved_cpus, q.reserved_memory_mib, q.reserved_disk_mib,
           ${effectivePrioritySql('q')} as prio, q.fair_key, q.created_at,
           (extract(epoch from q.created_at) * 1000000)::bigint::text as created_us, q.task_type, q.task_name
      from worker_reservation r join work_request q on q.id = r.work_request_id
     where r.worker_id = ?
  ), heads as (${HOST_HEADS_SQL})
  select (select coalesce(json_agg(held), '[]') from held) as held,
         (select row_to_json(stored) from stored) as stored,
         (select coalesce(json_agg(heads), '[]') from heads) as heads,
         (select coalesce(json_agg(x.work_request_id), '[]') from worker_reservation x
           where x.lapsed_at is null and x.worker_id <> ?
             and (x.work_request_id in (select id from heads) or x.work_request_id in (select work_request_id from stored))) as elsewhere`;

/** Reads what the choice needs, the worker's row locked by the caller's transaction. */
async function readHost(
  em: EntityManager,
  worker: HostWorker,
  eligible: readonly number[],
  now: Date,
  durations: DurationHistory | undefined,
): Promise<{
  running: RunningWork[];
  reservation: StoredReservation | null;
  heldBy: number | null;
  candidates: HostCandidate[];
}> {
  const [read] = await em.execute<{ held: Row[]; stored: Row | null; heads: Row[]; elsewhere: number[] }[]>(
    READ_HOST_SQL,
    [
      worker.id,
      worker.id,
      intArray(eligible),
      ...notBackedOffParams(worker.id, now),
      HOST_HEADS_PER_CLASS,
      HOST_HEADS,
      worker.id,
    ],
  );
  const { held, stored, heads } = read;
  // A candidate's run counts only when its task has a history (a backfill then relies on it ending); the
  // work already running is taken to end after its expected run, the default one without a history.
  const expected = (r: Row) =>
    durations ? knownDurationSeconds(durations, String(r.task_type), String(r.task_name)) : null;
  const runFor = (r: Row) =>
    durations ? expectedDurationSeconds(durations, String(r.task_type), String(r.task_name)) : DEFAULT_EXPECTED_SECONDS;
  const running = held.map((r): RunningWork => {
    const since = toDate(r.since as Date | string | null) ?? now;
    return { reserved: resourcesOf(r), expectedEndAt: new Date(since.getTime() + runFor(r) * 1000) };
  });
  const pendingReserved = stored && stored.status === 'PENDING' && !stored.lapsed_at;
  const reservation: StoredReservation | null = stored
    ? {
        workRequestId: Number(stored.work_request_id),
        reservedAt: toDate(stored.reserved_at as Date | string)!,
        lapsed: stored.lapsed_at !== null,
        request: stored.status === 'PENDING' ? resourcesOf(stored) : null,
      }
    : null;
  // The reserved request is a candidate in its place in the queue even when it is not among the heads read.
  const rows = [...heads];
  if (pendingReserved && !rows.some((r) => Number(r.id) === Number(stored.work_request_id)))
    rows.push({ ...stored, id: stored.work_request_id });
  const key = (r: Row): QueueKey<number> => ({
    prio: Number(r.prio),
    fairKey: Number(r.fair_key),
    createdUs: Number(r.created_us),
    id: Number(r.id),
  });
  rows.sort((a, b) => (queueBefore(key(a), key(b)) ? -1 : 1));
  const elsewhere = new Set(read.elsewhere.map(Number));
  const candidates = rows.map((r): HostCandidate => ({
    id: Number(r.id),
    reserved: resourcesOf(r),
    expectedSeconds: expected(r),
    reservedElsewhere: elsewhere.has(Number(r.id)),
  }));
  return { running, reservation, heldBy: reservation?.workRequestId ?? null, candidates };
}

/** Writes the choice's change to the worker's reservation. */
async function writeReservation(em: EntityManager, workerId: number, choice: HostChoice, now: Date): Promise<void> {
  const change = choice.reservation;
  if (change.kind === 'clear') await em.execute(`delete from worker_reservation where worker_id = ?`, [workerId]);
  else if (change.kind === 'lapse')
    await em.execute(`update worker_reservation set lapsed_at = ? where worker_id = ? and lapsed_at is null`, [
      now,
      workerId,
    ]);
  else if (change.kind === 'keep' && change.startsAt)
    await em.execute(`update worker_reservation set starts_at = ? where worker_id = ? and lapsed_at is null`, [
      change.startsAt,
      workerId,
    ]);
  else if (change.kind === 'reserve') {
    await em.execute(`delete from worker_reservation where worker_id = ?`, [workerId]);
    // Another worker's concurrent pull may have reserved the same request first: then this one holds nothing.
    await em.execute(
      `insert into worker_reservation (worker_id, work_request_id, reserved_at, starts_at) values (?, ?, ?, ?)
       on conflict (work_request_id) where lapsed_at is null do nothing`,
      [workerId, change.workRequestId, now, change.startsAt],
    );
  }
}

/**
 * Assigns to the worker `worker` (its row locked by the caller's transaction, available, under its
 * concurrency) the first request the choice takes that is not locked elsewhere and still fits, and
 * writes its reservation. Returns the assignment, or null when it takes nothing now.
 */
export async function assignOnHost(
  em: EntityManager,
  worker: HostWorker,
  eligible: readonly number[],
  now: Date,
  durations?: DurationHistory,
  settings: ReservationSettings = RESERVATION_DEFAULTS,
): Promise<NextAssignment | null> {
  const read = await readHost(em, worker, eligible, now, durations);
  const choice = chooseOnHost({
    offered: worker.offered,
    running: read.running,
    reservation: read.reservation,
    candidates: read.candidates,
    now,
    safetyFactor: settings.safetyFactor,
    maxSeconds: settings.maxSeconds,
  });
  await writeReservation(em, worker.id, choice, now);
  if (!choice.take.length) return null;
  const [row] = await em.execute<Row[]>(
    `with pick as (
       select w.id from work_request w cross join worker wk
        where wk.id = ? and w.id = any(?::int[]) and w.status = 'PENDING' and ${fitsResourcesSql('wk', 'w')}
        order by array_position(?::int[], w.id)
        limit 1
        for update of w skip locked
     ),
     assigned as (${assignSql('(select pick.id, ?::int from pick)', 'w.*')})
     select a.* from assigned a`,
    [worker.id, intArray(choice.take), intArray(choice.take), now, worker.id],
  );
  if (!row) return null;
  // The request it was held for starts here: the worker is held for nothing now.
  if (Number(row.id) === read.heldBy)
    await em.execute(`delete from worker_reservation where worker_id = ?`, [worker.id]);
  return {
    workRequestId: Number(row.id),
    workerId: worker.id,
    workspaceId: Number(row.workspace_id),
    pendingAt: toDate(row.pending_at as Date | string | null),
    row,
  };
}
