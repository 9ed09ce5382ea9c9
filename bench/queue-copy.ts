/**
 * The client phase's pending queue on a server whose API has no `createWorkRequests` (0.1.0): one
 * request is created through the API, and this copies it in SQL on the server's own database, N − 1
 * times in one `insert … select`, then runs `analyze work_request` so that the planner knows the queue.
 *
 * A copy takes every column of the original but `id` (a serial: each copy gets the next one), read
 * from information_schema, so whatever per-row state the version keeps is copied as it is: the
 * status (PENDING), the task, the workspace and creator, the frozen tag sets and their entries, the
 * task class (`class_id`), `pending_at` and `created_at`. In 0.1.0 (aac64f2) that is the whole
 * queue: a pull (src/scheduler/next-work.ts there) locks the worker, counts its active requests, and
 * takes the head of its eligible classes from `work_request` alone, through the partial index on
 * (class_id, priority, created_at, id) where PENDING. Its other tables are not per pending request:
 * `task_class` is per class (the copies share the original's), `work_request_dependency` has rows only
 * for dependencies (a noop request has none), `task_duration` is written at completion. Insert
 * triggers, if a version has any, fire for each copied row as for any insert. The copies share the
 * original's `created_at`, so among themselves they are in id order.
 */
import pg from 'pg';

/** A PostgreSQL identifier, quoted. */
export const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** The statement that copies request $1 $2 times: every column in `columns` taken from it. */
export function copyStatement(columns: readonly string[]): string {
  if (!columns.length) throw new Error('no columns to copy');
  if (columns.includes('id')) throw new Error('the id is not copied: each copy gets its own');
  const list = columns.map(quoteIdent).join(', ');
  const from = columns.map((c) => `o.${quoteIdent(c)}`).join(', ');
  return `insert into work_request (${list}) select ${from} from work_request o cross join generate_series(1, $2::int) where o.id = $1`;
}

/** Throws unless the database holds no work request: the phase's figures assume the queue it makes. */
export async function assertNoWorkRequests(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>('select count(*)::int as n from work_request');
    if (rows[0].n > 0)
      throw new Error(
        `the server's database already holds ${rows[0].n} work requests: the client phase needs one without any`,
      );
  } finally {
    await client.end();
  }
}

/** Copies work request `id` `copies` times (see the header), then analyzes the table. */
export async function copyWorkRequest(databaseUrl: string, id: number, copies: number): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ column_name: string }>(
      `select column_name from information_schema.columns
        where table_schema = current_schema() and table_name = 'work_request' and column_name <> 'id'
        order by ordinal_position`,
    );
    const result = await client.query(copyStatement(rows.map((r) => r.column_name)), [id, copies]);
    if (result.rowCount !== copies)
      throw new Error(`copied work request ${id} ${result.rowCount} times, not ${copies}`);
    await client.query('analyze work_request');
  } finally {
    await client.end();
  }
}
