import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, timestampArray, toDate } from '../../storage/db/arrays.js';
import { isActiveSql } from '../rules/active-work.js';
import { aheadInQueueSql, effectivePrioritySql, headsOrderSql, queueOrderSql } from '../rules/queue-order.js';
import { SIMULATED_AHEAD } from '../matching/start-estimate.js';

/** A task as the start estimate reads it, to look up its expected run (task-history.ts: expectedDurationSeconds). */
export interface TaskRun {
  readonly taskType: string;
  readonly taskName: string;
}

/** A request a worker holds (ASSIGNED or RUNNING): its task and since when (its start, else its assignment). */
export interface ActiveRun extends TaskRun {
  readonly since: Date;
}

/** How many errors a class keeps (the newest): its median absolute error is theirs. */
export const ESTIMATE_ERRORS_KEPT = 100;

/** Consecutive requests ahead with the same task, in queue order: the queue ahead as runs of one task each. */
export interface AheadRun extends TaskRun {
  readonly count: number;
}

/**
 * The tasks of the pending requests ahead of each pending request in its class's queue (the same
 * requests queue-position.ts counts), in queue order, at most {@link SIMULATED_AHEAD} each, in one
 * statement: per request a walk of its class's part of `work_request_pending_class_order`, returned as
 * runs of consecutive requests of one task (a class is mostly one task: mostly one row per request).
 */
export async function aheadRuns(em: EntityManager, ids: readonly number[]): Promise<Map<number, AheadRun[]>> {
  if (!ids.length) return new Map();
  const rows = await em.execute<{ id: number; task_type: string; task_name: string; n: number }[]>(
    `select r.id, a.task_type, a.task_name, count(*)::int as n, min(a.k) as first
       from work_request r
       cross join lateral (
         select q.task_type, q.task_name, q.k, q.k - row_number() over (partition by q.task_type, q.task_name order by q.k) as island
           from (
             select l.task_type, l.task_name, row_number() over (order by ${headsOrderSql('l')}) as k
               from (
                 select o.task_type, o.task_name, ${effectivePrioritySql('o')} as prio, o.fair_key, o.created_at, o.id from work_request o
                  where o.status = 'PENDING' and o.class_id = r.class_id and ${aheadInQueueSql('o', 'r')}
                  order by ${queueOrderSql('o')} limit ${SIMULATED_AHEAD}
               ) l
           ) q
       ) a
      where r.id = any(?::int[]) and r.status = 'PENDING'
      group by r.id, a.task_type, a.task_name, a.island
      order by r.id, first`,
    [intArray(ids)],
  );
  const out = new Map<number, AheadRun[]>();
  for (const r of rows) {
    let list = out.get(r.id);
    if (!list) out.set(r.id, (list = []));
    list.push({ taskType: r.task_type, taskName: r.task_name, count: r.n });
  }
  return out;
}

/**
 * The active work of the given workers (the matching workers of the requests estimated), by worker
 * id, in one statement: at most a worker's concurrency each, so bounded by the workers asked.
 */
export async function activeRuns(em: EntityManager, workerIds: readonly number[]): Promise<Map<number, ActiveRun[]>> {
  if (!workerIds.length) return new Map();
  const rows = await em.execute<{ worker_id: number; task_type: string; task_name: string; since: Date | string }[]>(
    `select a.worker_id, a.task_type, a.task_name, coalesce(a.started_at, a.assigned_at, now()) as since
       from work_request a where a.worker_id = any(?::int[]) and ${isActiveSql('a')}`,
    [intArray(workerIds)],
  );
  const out = new Map<number, ActiveRun[]>();
  for (const r of rows) {
    let list = out.get(r.worker_id);
    if (!list) out.set(r.worker_id, (list = []));
    list.push({ taskType: r.task_type, taskName: r.task_name, since: toDate(r.since)! });
  }
  return out;
}

/**
 * Keeps each request's first estimate (`estimated_start_at`, set once, while it is PENDING), in one
 * statement; an estimate already kept is never changed.
 */
export async function keepFirstEstimates(
  em: EntityManager,
  estimates: readonly { id: number; at: Date }[],
): Promise<void> {
  if (!estimates.length) return;
  await em.execute(
    `update work_request w set estimated_start_at = s.at
       from unnest(?::int[], ?::timestamptz[]) as s(id, at)
      where w.id = s.id and w.status = 'PENDING' and w.estimated_start_at is null`,
    [intArray(estimates.map((e) => e.id)), timestampArray(estimates.map((e) => e.at))],
  );
}

/**
 * Wraps the statement that starts a request (`update work_request ... returning *`): in the same
 * statement, a request with a kept estimate adds |started − estimated| to its class's errors, of which
 * the newest {@link ESTIMATE_ERRORS_KEPT} are kept. Returns the started rows as the wrapped statement does.
 */
export const recordingEstimateErrorSql = (startSql: string) => `
  with started as (${startSql}),
  recorded as (
    insert into class_start_estimate_error as e (class_id, errors_seconds)
    select s.class_id, array[abs(extract(epoch from (s.started_at - s.estimated_start_at)))::float8]
      from started s where s.class_id is not null and s.estimated_start_at is not null and s.started_at is not null
    on conflict (class_id) do update
      set errors_seconds = (e.errors_seconds || excluded.errors_seconds)[greatest(1, cardinality(e.errors_seconds) + 2 - ${ESTIMATE_ERRORS_KEPT}):]
  )
  select * from started`;

/** The errors kept per class id (newest last), in one statement; classes without any are absent. */
export async function estimateErrors(em: EntityManager, classIds: readonly number[]): Promise<Map<number, number[]>> {
  if (!classIds.length) return new Map();
  const rows = await em.execute<{ class_id: number; errors_seconds: number[] }[]>(
    `select class_id, errors_seconds from class_start_estimate_error where class_id = any(?::int[])`,
    [intArray(classIds)],
  );
  return new Map(rows.map((r) => [r.class_id, r.errors_seconds.map(Number)]));
}

/** The first pending request of a class in queue order, with what a diagnosis reads of it. */
export interface ClassHead {
  readonly id: number;
  readonly classId: number;
  readonly status: 'PENDING';
  readonly taskType: string;
  readonly taskName: string;
  readonly providedTags: string[];
  readonly requiredTags: string[];
  readonly estimatedStartAt: Date | null;
}

/** The head of each class's queue (queueOrderSql), in one statement: one walk of `work_request_pending_class_order` per class. Classes with nothing pending are absent. */
export async function classHeads(em: EntityManager, classIds: readonly number[]): Promise<ClassHead[]> {
  if (!classIds.length) return [];
  const rows = await em.execute<
    {
      id: number;
      class_id: number;
      task_type: string;
      task_name: string;
      provided_tags: string[];
      required_tags: string[];
      estimated_start_at: Date | string | null;
    }[]
  >(
    `select h.id, c.id as class_id, h.task_type, h.task_name, h.provided_tags, h.required_tags, h.estimated_start_at
       from unnest(?::int[]) as c(id)
       cross join lateral (
         select o.id, o.task_type, o.task_name, o.provided_tags, o.required_tags, o.estimated_start_at from work_request o
          where o.status = 'PENDING' and o.class_id = c.id order by ${queueOrderSql('o')} limit 1
       ) h`,
    [intArray(classIds)],
  );
  return rows.map((r) => ({
    id: r.id,
    classId: r.class_id,
    status: 'PENDING',
    taskType: r.task_type,
    taskName: r.task_name,
    providedTags: r.provided_tags,
    requiredTags: r.required_tags,
    estimatedStartAt: toDate(r.estimated_start_at),
  }));
}
