/**
 * Set-up steps the scheduler tests share: an empty scheduling state, and workers, pools and work
 * requests written straight into the tables (fast enough for hundreds of generated cases), classified
 * by the real classifier. Everything else a test does goes through the scheduler or GraphQL.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, textArray } from '../../src/storage/db/arrays.js';
import { hashToken } from '../../src/services/identity/tokens.js';
import { classIdsFor, registerSignificantTags } from '../../src/scheduler/storage/classes.js';
import { ADMIN_TOKEN, type TestApp } from './app.js';

/**
 * Whether a worker is connected with fresh metadata, disconnected (after a fresh report), connected
 * with a report older than the freshness setting, or connected without ever reporting its metadata.
 */
export type Connection = 'connected' | 'disconnected' | 'stale' | 'unreported';

/** A worker row to write; `active` ASSIGNED rows are written for it, `token` is its bearer token. */
export interface WorkerRow {
  readonly name: string;
  readonly type: 'worker' | 'server' | 'signing' | 'not-assignable';
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  readonly concurrency: number;
  readonly enabled: boolean;
  readonly draining: boolean;
  readonly connection: Connection;
  readonly terminated: boolean;
  readonly active: number;
  readonly pool?: string | null;
  /** Quarantined (scheduler/storage/quarantine.ts): no work until lifted. */
  readonly quarantined?: boolean;
}

/**
 * A farm where every worker can run every request through four task classes, so that concurrent
 * callers contend on shared queue heads (the race and pending-count tests).
 */
export const CONTENDED = {
  providedTags: ['worker:type:worker', 'worker:cap:sbuild', 'worker:build-arch:amd64', 'worker:memory-gib=8'],
  classes: [
    ['worker:type:worker'],
    ['worker:type:worker', 'worker:cap:sbuild'],
    ['worker:type:worker', 'worker:build-arch:amd64'],
    ['worker:type:worker', 'worker:memory-gib>=4'],
  ],
} as const;

/** `count` connected, idle workers of the contended farm, named `prefix-NN…`. */
export function contendedWorkers(prefix: string, count: number, concurrency: number): WorkerRow[] {
  const width = String(count - 1).length;
  return Array.from({ length: count }, (_, i) => ({
    name: `${prefix}-${String(i).padStart(width, '0')}`,
    type: 'worker',
    providedTags: CONTENDED.providedTags,
    requiredTags: [],
    concurrency,
    enabled: true,
    draining: false,
    connection: 'connected',
    terminated: false,
    active: 0,
  }));
}

/** A PENDING work request to write: `createdAtSeconds` after a fixed base time, so that ties are possible. */
export interface RequestRow {
  readonly key: string;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  readonly priorityBase: number;
  readonly priorityAdjustment: number;
  readonly createdAtSeconds: number;
  /**
   * Its fair key (scheduler/rules/queue-order.ts) as seconds after the base time; by default its creation
   * time, as a workspace with nothing queued gets it.
   */
  readonly fairKeySeconds?: number;
}

/** A worker pool row to write. */
export interface PoolRow {
  readonly name: string;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  readonly specifications: Record<string, unknown>;
  readonly enabled: boolean;
}

/** What was written: ids by name or key. */
export interface Seeded {
  readonly workerIds: Map<string, number>;
  readonly requestIds: Map<string, number>;
  readonly tokens: Map<string, string>;
}

const STALE_SECONDS = 2 * 60 * 60; // beyond the default freshness of 65 minutes
const BASE_CREATED_AT = '2026-01-01T00:00:00Z';

const bases = new Map<string, { workspaceId: number; userId: number }>();

/** The workspace and user that written requests belong to, created once per database. */
async function base(t: TestApp, em: EntityManager): Promise<{ workspaceId: number; userId: number }> {
  const known = bases.get(t.dbUrl);
  if (known) return known;
  await em.execute(`insert into scope (name, created_at) values ('sched', now()) on conflict (name) do nothing`);
  await em.execute(
    `insert into app_user (username, is_admin, created_at) values ('sched-user', false, now()) on conflict (username) do nothing`,
  );
  await em.execute(
    `insert into workspace (scope_id, name, is_public, created_at) select id, 'main', true, now() from scope where name = 'sched'
     on conflict (scope_id, name) do nothing`,
  );
  const [row] = await em.execute<{ workspace_id: number; user_id: number }[]>(
    `select w.id as workspace_id, u.id as user_id from workspace w join scope s on s.id = w.scope_id, app_user u
      where s.name = 'sched' and w.name = 'main' and u.username = 'sched-user'`,
  );
  const found = { workspaceId: row.workspace_id, userId: row.user_id };
  bases.set(t.dbUrl, found);
  return found;
}

/**
 * Empties the scheduling tables (work requests, workers, pools, significant tags, tokens) and puts the
 * admin token back. DELETE rather than TRUNCATE: on tables this small it is a hundred times faster
 * (TRUNCATE recreates every table and index file). Task classes are kept on purpose: they are
 * immutable and never deleted in production, and every server process caches them by id.
 */
export async function resetScheduling(t: TestApp): Promise<void> {
  await t.app.orm.em.fork().transactional(async (tx) => {
    for (const table of [
      'work_request_dependency',
      'work_request',
      'token',
      'instance',
      'worker',
      'worker_pool',
      'significant_tag',
      'task_duration',
      'class_start_estimate_error',
      'task_statistics_histogram',
    ])
      await tx.execute(`delete from ${table}`);
    await tx.execute(
      `insert into token (hash, kind, label, user_id, enabled, created_at)
       select ?, 'admin', 'test admin', id, true, now() from app_user where username = 'admin'`,
      [hashToken(ADMIN_TOKEN)],
    );
  });
}

/** A deterministic bearer token for a written worker. */
export const workerToken = (name: string) => `tsk_worker_test-${name}`;

/**
 * Writes pools, workers (with their tokens and their ASSIGNED load) and PENDING requests, classifies
 * the requests and registers the tags workers and pools require, in the given order: registering
 * after classifying exercises the re-classification of pending requests.
 */
export async function seedScheduling(
  t: TestApp,
  world: { pools?: readonly PoolRow[]; workers: readonly WorkerRow[]; requests: readonly RequestRow[] },
  order: 'register-first' | 'classify-first' = 'register-first',
): Promise<Seeded> {
  const em = t.app.orm.em.fork();
  const { workspaceId, userId } = await base(t, em);
  const pools = world.pools ?? [];
  const poolIds = new Map<string, number>();
  for (const p of pools) {
    const [row] = await em.execute<{ id: number }[]>(
      `insert into worker_pool (name, provider_type, specifications, provided_tags, required_tags, enabled, created_at)
       values (?, 'local', ?::jsonb, ?::text[], ?::text[], ?, now()) returning id`,
      [p.name, JSON.stringify(p.specifications), textArray(p.providedTags), textArray(p.requiredTags), p.enabled],
    );
    poolIds.set(p.name, row.id);
  }

  const workerIds = new Map<string, number>();
  const tokens = new Map<string, string>();
  if (world.workers.length) {
    const ws = world.workers;
    const rows = await em.execute<{ id: number; name: string }[]>(
      `insert into worker (name, type, pool_id, concurrency, enabled, draining, connected_at, last_seen_at, metadata_reported_at, registered_at, instance_created_at, terminated_at, provided_tags, required_tags, quarantined_at, quarantine_reason)
       select v.name, v.type, nullif(v.pool_id, 0), v.concurrency, v.enabled, v.draining,
              case when v.conn = 'disconnected' then null else now() - interval '3 hours' end,
              case when v.conn = 'disconnected' then null when v.conn = 'stale' then now() - make_interval(secs => ?) else now() - interval '1 minute' end,
              case when v.conn = 'unreported' then null when v.conn = 'stale' then now() - make_interval(secs => ?) else now() - interval '1 minute' end,
              now() - interval '3 hours', case when v.pool_id = 0 then null else now() - interval '3 hours' end,
              case when v.terminated then now() - interval '1 minute' end,
              string_to_array(v.provided, ' '), string_to_array(v.required, ' '),
              case when v.quarantined then now() - interval '1 minute' end, case when v.quarantined then 'test' end
         from unnest(?::text[], ?::text[], ?::int[], ?::int[], ?::boolean[], ?::boolean[], ?::text[], ?::boolean[], ?::text[], ?::text[], ?::boolean[])
           as v(name, type, pool_id, concurrency, enabled, draining, conn, terminated, provided, required, quarantined)
       returning id, name`,
      [
        STALE_SECONDS,
        STALE_SECONDS,
        textArray(ws.map((w) => w.name)),
        textArray(ws.map((w) => w.type)),
        intArray(ws.map((w) => (w.pool ? poolIds.get(w.pool)! : 0))),
        intArray(ws.map((w) => w.concurrency)),
        `{${ws.map((w) => w.enabled).join(',')}}`,
        `{${ws.map((w) => w.draining).join(',')}}`,
        textArray(ws.map((w) => w.connection)),
        `{${ws.map((w) => w.terminated).join(',')}}`,
        textArray(ws.map((w) => w.providedTags.join(' '))),
        textArray(ws.map((w) => w.requiredTags.join(' '))),
        `{${ws.map((w) => w.quarantined ?? false).join(',')}}`,
      ],
    );
    for (const r of rows) workerIds.set(r.name, r.id);
    for (const w of ws) tokens.set(w.name, workerToken(w.name));
    await em.execute(
      `insert into token (hash, kind, label, worker_id, enabled, created_at)
       select h, 'worker', 'test', id, true, now() from unnest(?::text[], ?::int[]) as v(h, id)`,
      [textArray(ws.map((w) => hashToken(workerToken(w.name)))), intArray(ws.map((w) => workerIds.get(w.name)!))],
    );
    // The load: ASSIGNED requests held by each worker (never PENDING again in these tests).
    const held = ws.flatMap((w) => Array.from({ length: w.active }, () => workerIds.get(w.name)!));
    if (held.length) {
      await em.execute(
        `insert into work_request (workspace_id, created_by_id, task_type, task_name, task_data, status, worker_id, created_at, assigned_at)
         select ?, ?, 'worker', 'noop', '{}', 'ASSIGNED', id, now() - interval '1 hour', now() - interval '1 hour' from unnest(?::int[]) as v(id)`,
        [workspaceId, userId, intArray(held)],
      );
    }
  }

  const requestIds = await insertPending(t, em, world.requests);
  const required = [...world.workers.flatMap((w) => w.requiredTags), ...pools.flatMap((p) => p.requiredTags)];
  const register = () => em.fork().transactional((tx) => registerSignificantTags(tx, required));
  if (order === 'register-first') await register();
  await em.fork().transactional((tx) => classifyPending(tx));
  if (order === 'classify-first') await register();
  return { workerIds, requestIds, tokens };
}

/** Writes PENDING requests, not classified yet, through the given EntityManager (which may be in a transaction); returns their ids by key. */
export async function insertPending(
  t: TestApp,
  em: EntityManager,
  requests: readonly RequestRow[],
): Promise<Map<string, number>> {
  if (!requests.length) return new Map();
  const { workspaceId, userId } = await base(t, em);
  const rows = await em.execute<{ id: number; task_name: string }[]>(
    `insert into work_request (workspace_id, created_by_id, task_type, task_name, task_data, status, priority_base, priority_adjustment,
                               provided_tags, required_tags, created_at, pending_at, fair_key)
     select ?, ?, 'worker', v.key, '{}', 'PENDING', v.pb, v.pa, string_to_array(v.provided, ' '), string_to_array(v.required, ' '),
            ?::timestamptz + make_interval(secs => v.secs), now(), (extract(epoch from ?::timestamptz + make_interval(secs => v.fair)) * 1000)::bigint
       from unnest(?::text[], ?::int[], ?::int[], ?::text[], ?::text[], ?::int[], ?::int[]) with ordinality as v(key, pb, pa, provided, required, secs, fair, n)
      order by v.n
     returning id, task_name`,
    [
      workspaceId,
      userId,
      BASE_CREATED_AT,
      BASE_CREATED_AT,
      textArray(requests.map((r) => r.key)),
      intArray(requests.map((r) => r.priorityBase)),
      intArray(requests.map((r) => r.priorityAdjustment)),
      textArray(requests.map((r) => r.providedTags.join(' '))),
      textArray(requests.map((r) => r.requiredTags.join(' '))),
      intArray(requests.map((r) => r.createdAtSeconds)),
      intArray(requests.map((r) => r.fairKeySeconds ?? r.createdAtSeconds)),
    ],
  );
  return new Map(rows.map((r) => [r.task_name, r.id]));
}

/** Gives every unclassified PENDING request its task class, the way submission does; run it inside a transaction. */
export async function classifyPending(tx: EntityManager): Promise<void> {
  const rows = await tx.execute<{ id: number; provided_tags: string[]; required_tags: string[] }[]>(
    `select id, provided_tags, required_tags from work_request where status = 'PENDING' and class_id is null order by id`,
  );
  if (!rows.length) return;
  const classIds = await classIdsFor(
    tx,
    rows.map((r) => ({ providedTags: r.provided_tags, requiredTags: r.required_tags })),
  );
  await tx.execute(
    `update work_request w set class_id = v.c from unnest(?::int[], ?::int[]) as v(id, c) where w.id = v.id`,
    [intArray(rows.map((r) => r.id)), intArray(classIds)],
  );
}

/** Runs fn in a transaction that is always rolled back: to ask "what would happen" without changing anything. */
export async function inRollback<T>(t: TestApp, fn: (tx: EntityManager) => Promise<T>): Promise<T> {
  const em = t.app.orm.em.fork();
  await em.begin();
  try {
    return await fn(em);
  } finally {
    await em.rollback();
  }
}

/** The name of the worker holding a request, or null while it is pending. */
export async function holderOf(t: TestApp, id: string): Promise<string | null> {
  const [row] = await t.sql<{ name: string | null }>(
    `select w.name from work_request r left join worker w on w.id = r.worker_id where r.id = ?`,
    [Number(id)],
  );
  return row.name;
}

/** Puts every pending and active request aside (ABORTED), so that every worker is free again. */
export const abortAllActive = (t: TestApp) =>
  t.sql(`update work_request set status = 'ABORTED' where status in ('PENDING', 'ASSIGNED', 'RUNNING')`);
