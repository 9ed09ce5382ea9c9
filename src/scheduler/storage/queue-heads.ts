import { effectivePrioritySql, headsOrderSql, queueOrderSql } from '../rules/queue-order.js';
import { notBackedOffSql } from '../rules/release-backoff.js';
import { assignSql } from './assign.js';

/**
 * The SQL of the queue: the head of each eligible class's queue, merged in docs/design.md: scheduler order
 * (effective priority desc, then fair key between workspaces, then oldest, then id: `queueOrderSql`). Each class probe walks the partial index
 * `work_request_pending_class_order`, so the cost grows with the number of classes probed, not with
 * the length of the queue. With `withTask` each head comes with its task, whose history may make it
 * heavy work (heavy-work.ts): a read of the heads' own rows. Without it the heads are read from the index
 * alone (an index-only scan), which is what a pass asks for when no task is heavy by its history.
 * The fair key and the creation time (in microseconds, all of its precision) come as text, exact, so
 * that the pass can merge heads read by several statements in this same order (pass.ts, `headBefore`).
 * Per class: its id, how many heads, and how many to skip (those the pass read before).
 */
export const classHeadsSql = (withTask: boolean) => {
  const task = withTask ? ', w.task_type, w.task_name' : '';
  const taskOut = withTask ? ', t.task_type, t.task_name' : '';
  return `
  select t.id, t.class_id, t.prio, t.fair_key::text as fair_key, (extract(epoch from t.created_at) * 1000000)::bigint::text as created_us${taskOut}
    from unnest(?::int[], ?::int[], ?::int[]) as c(id, lim, skip)
    cross join lateral (
      select w.id, w.class_id, ${effectivePrioritySql('w')} as prio, w.fair_key, w.created_at${task}
        from work_request w
       where w.status = 'PENDING' and w.class_id = c.id
       order by ${queueOrderSql('w')}
       limit c.lim offset c.skip
    ) t
   order by ${headsOrderSql('t')}`;
};

/**
 * The same heads with one limit for every class (one worker's request). The limit is a plain
 * parameter the planner can see: behind `unnest` it guesses a tenth of each class, and with a
 * hundred classes that guess crosses jit_above_cost, adding some 15 ms of JIT compilation to a
 * query that runs in 1 to 3 ms.
 */
export const CLASS_HEADS_EVEN_SQL = `
  select t.id, t.class_id, t.prio, t.fair_key, t.created_at
    from unnest(?::int[]) as c(id)
    cross join lateral (
      select w.id, w.class_id, ${effectivePrioritySql('w')} as prio, w.fair_key, w.created_at
        from work_request w
       where w.status = 'PENDING' and w.class_id = c.id
       order by ${queueOrderSql('w')}
       limit ?
    ) t
   order by ${headsOrderSql('t')}
   limit ?`;

/** Locks every candidate still PENDING and not locked by another caller. */
export const LOCK_ALL_SQL = `
  select w.id from work_request w
   where w.id = any(?::int[]) and w.status = 'PENDING'
   for update skip locked`;

/**
 * One worker's pull in one statement: the heads of its eligible classes, the first of them still
 * PENDING, not backed off from this worker (rules/release-backoff.ts) and not locked by another caller
 * (SKIP LOCKED), assigned to it (assignSql). Parameters: the eligible classes, the heads per class
 * (twice), notBackedOffParams, the time of the assignment, the worker. Returns one row: how many heads
 * there were (`heads_`; none: nothing to do; some but no id: all taken by concurrent callers, look
 * deeper) and every column of the request it assigned, as the assignment left it (all null when none).
 */
export const ASSIGN_FIRST_SQL = assignFirstSql();

/**
 * ASSIGN_FIRST_SQL, assigning only when `guard` holds: `guard.cte` is the SQL of a relation of at most
 * one row, whose columns' names end with `_` (its parameters come first, before ASSIGN_FIRST_SQL's),
 * and `guard.holds` a condition on its columns. The statement answers the guard's columns too (null
 * when it has no row).
 */
export function assignFirstSql(guard?: { readonly cte: string; readonly holds: string }): string {
  return `
  with ${guard ? `guard as (${guard.cte}),` : ''}
  heads as (${CLASS_HEADS_EVEN_SQL}),
  pick as (
    select w.id from work_request w join heads h on h.id = w.id
     where ${guard ? `coalesce((select ${guard.holds} from guard), false) and ` : ''}w.status = 'PENDING' and ${notBackedOffSql('w')}
     order by ${queueOrderSql('w')}
     limit 1
     for update of w skip locked
  ),
  assigned as (${assignSql('(select pick.id, ?::int from pick)', 'w.*')})
  select ${guard ? 'g.*, ' : ''}(select count(*) from heads)::int as heads_, a.*
    from (values (0)) as one (n)${guard ? ' left join guard g on true' : ''} left join assigned a on true`;
}
