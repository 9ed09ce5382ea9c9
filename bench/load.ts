/**
 * Loads a generated workload into a dedicated database, fast: the database is dropped, recreated
 * and migrated by the real migrations; workers go in with one `unnest` statement; the queue goes in
 * by batches of `INSERT … SELECT` over `unnest` arrays of small integers, the tags of each row
 * assembled in the server from its variant (bench/workload.ts) and its source package.
 *
 * Site and workspace task rules are created by the service's own `createTaskRule`, as an admin.
 * Task classes come from the real `classIdsFor`, once per variant, after the exclusive workers'
 * and pools' required tags were made significant by the real `registerSignificantTags`. The
 * secondary indexes of `work_request` are dropped during the bulk insert and rebuilt afterwards
 * from their own definitions (the migration's), then everything is VACUUM ANALYZEd.
 */
import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { loadConfig, type Config } from '../src/core/config/config.js';
import { UserSchema } from '../src/storage/entities/user.js';
import { WorkspaceSchema } from '../src/storage/entities/workspace.js';
import { createOrm, migrate } from '../src/storage/orm.js';
import { AnalysisSources, analyzeRequest } from '../src/services/workflows/task-analysis.js';
import { createTaskRule } from '../src/services/work/task-rules.js';
import { classIdsFor, registerSignificantTags } from '../src/scheduler/storage/classes.js';
import { RECOUNT_PENDING_SQL } from '../src/scheduler/storage/pending-counts.js';
import { phase } from './progress.js';
import { Random } from './prng.js';
import { QUEUE_SPAN_SECONDS, type Workload } from './workload.js';

const BATCH_ROWS = 50_000;
const SAMPLE_CHECKS = 300;
/** The admin who writes the task rules (not one of the workload's users). */
const ADMIN_USERNAME = 'bench-admin';

/** The loaded database, open. */
export interface LoadedDatabase {
  readonly url: string;
  readonly orm: MikroORM;
  /** Database ids of the workload's workers, in workload order. */
  readonly workerIds: readonly number[];
  /** The id of the first work request (ids are consecutive, in creation order). */
  readonly firstRequestId: number;
  readonly classCount: number;
  /** Completed requests loaded as history. */
  readonly historyRows: number;
  /** Milliseconds per loading phase. */
  readonly timings: Record<string, number>;
}

/** A URL for another database on the same server. */
export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const joined = (tags: readonly string[]) => tags.join(' '); // tags never contain whitespace (docs/design.md: tags and provenance)

/** Drops and recreates the database, migrates it, and loads the workload into it. */
export async function loadWorkload(
  workload: Workload,
  serverUrl: string,
  dbName: string,
  options: { history?: number; sharedResources?: boolean } = {},
): Promise<LoadedDatabase> {
  const timings: Record<string, number> = {};
  const url = withDatabase(serverUrl, dbName);
  let p = phase('create and migrate database');
  await withClient(serverUrl, async (c) => {
    await c.query(`drop database if exists "${dbName}" with (force)`);
    await c.query(`create database "${dbName}"`);
  });
  const orm = await createOrm({ clientUrl: url }, { pool: { min: 0, max: 10 }, logger: () => undefined }); // quiet migrator
  await migrate(orm, url);
  timings.migrate = p.end();

  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    p = phase('directory, pools and workers', workload.workers.length);
    const config = loadConfig({}); // the defaults: amd64 is the default architecture, as the workload assumes
    const ids = await loadDirectory(client, workload);
    const ruleCount = await createRules(orm, config, workload);
    const workerIds = await loadWorkers(client, workload, ids.poolIds);
    timings.workers = p.end(
      `${workload.workers.length} workers, ${workload.pools.length} pools, ${ruleCount} task rules`,
    );

    p = phase('task classes', workload.variants.length);
    const requiredByWorkers = [
      ...new Set([
        ...workload.workers.flatMap((w) => w.tags.requiredTags),
        ...workload.pools.flatMap((x) => x.requiredTags),
      ]),
    ];
    await orm.em.fork().transactional((tx) => registerSignificantTags(tx, requiredByWorkers));
    const classOfVariant = await orm.em.fork().transactional((tx) =>
      classIdsFor(
        tx,
        workload.variants.map((v) => ({ providedTags: v.providedTags, requiredTags: v.requiredTags })),
      ),
    );
    const classCount = new Set(classOfVariant).size;
    timings.classes = p.end(`${workload.variants.length} variants in ${classCount} classes`);

    const historyRows = Math.round((options.history ?? 0) * workload.rows.variant.length);
    const firstRequestId = await loadQueue(client, workload, ids, classOfVariant, timings, { historyRows, workerIds });
    if (historyRows) {
      p = phase('history: last completions and task durations');
      await recordHistory(client);
      timings.historyTotals = p.end();
    }

    p = phase('check a sample against the analysis');
    const checked = await checkSample(client, orm, config, workload, ids, firstRequestId);
    timings.check = p.end(`${checked.rows} rows agree, ${checked.rules} (workspace, rule) pairs that fired among them`);

    if (options.sharedResources) {
      p = phase('shared resources: half the workers, every pending request');
      timings.sharedResources = p.end(await shareResources(client));
    }

    p = phase('vacuum analyze');
    await client.query('vacuum analyze');
    timings.vacuum = p.end();
    return { url, orm, workerIds, firstRequestId, classCount, historyRows, timings };
  } catch (err) {
    await orm.close(true);
    throw err;
  } finally {
    await client.end();
  }
}

/**
 * Every other worker shares its resources, offering what its metadata reports, and every pending request
 * reserves 1 to 8 CPUs, 1 to 32 GiB of memory and 1 to 16 GiB of disk (by its id: the same on every run).
 */
async function shareResources(c: pg.Client): Promise<string> {
  const workers = await c.query(
    `update worker set offers_resources = true,
            offered_cpus = coalesce((dynamic_metadata->>'system:cpu_count')::int, 8),
            offered_memory_mib = coalesce(((dynamic_metadata->>'system:total_physical_memory')::bigint / 1048576)::int, 16384),
            offered_disk_mib = coalesce(((dynamic_metadata->>'system:disk_free')::bigint / 1048576)::int, 102400)
      where id % 2 = 0`,
  );
  const requests = await c.query(
    `update work_request set reserved_cpus = 1 << (id % 4), reserved_memory_mib = 1024 << (id % 6),
            reserved_disk_mib = 1024 << (id % 5),
            resource_sources = '{"cpus":"user","memoryMib":"user","diskMib":"user"}'
      where status = 'PENDING'`,
  );
  return `${workers.rowCount} workers, ${requests.rowCount} requests`;
}

interface DirectoryIds {
  readonly workspaceIds: number[];
  readonly userIds: number[];
  readonly poolIds: number[];
}

async function loadDirectory(c: pg.Client, w: Workload): Promise<DirectoryIds> {
  const scopes = [...new Set(w.workspaces.map((s) => s.scope))];
  const scopeRows = (
    await c.query<{ id: number; name: string }>(
      `insert into scope (name, created_at) select unnest($1::text[]), now() returning id, name`,
      [scopes],
    )
  ).rows;
  const scopeId = new Map(scopeRows.map((r) => [r.name, r.id]));
  const workspaceIds = (
    await c.query<{ id: number }>(
      `insert into workspace (scope_id, name, is_public, created_at)
       select s, n, true, now() from unnest($1::int[], $2::text[]) with ordinality as v(s, n, o) order by o returning id`,
      [w.workspaces.map((s) => scopeId.get(s.scope)), w.workspaces.map((s) => s.name)],
    )
  ).rows.map((r) => r.id);
  const userIds = (
    await c.query<{ id: number }>(
      `insert into app_user (username, is_admin, created_at) select u, false, now() from unnest($1::text[]) with ordinality as v(u, o) order by o returning id`,
      [w.users],
    )
  ).rows.map((r) => r.id);
  const [group] = (
    await c.query<{ id: number }>(`insert into user_group (scope_id, name) values ($1, $2) returning id`, [
      scopeId.get(w.group.scope),
      w.group.name,
    ])
  ).rows;
  await c.query(`insert into user_group_member (group_id, user_id) select $1, unnest($2::int[])`, [group.id, userIds]);
  await c.query(`insert into app_user (username, is_admin, created_at) values ($1, true, now())`, [ADMIN_USERNAME]);
  const poolIds = (
    await c.query<{ id: number }>(
      `insert into worker_pool (name, provider_type, specifications, provided_tags, required_tags, max_active_instances, min_idle_instances, idle_timeout_seconds, target_latency_seconds, enabled, created_at)
       select n, t, s::jsonb, string_to_array(pt, ' '), string_to_array(rt, ' '), m, i, 600, l, true, now()
         from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::int[]) with ordinality as v(n, t, s, pt, rt, m, i, l, o)
        order by o returning id`,
      [
        w.pools.map((x) => x.name),
        w.pools.map((x) => x.providerType),
        w.pools.map((x) => JSON.stringify(x.specifications)),
        w.pools.map((x) => joined(x.providedTags)),
        w.pools.map((x) => joined(x.requiredTags)),
        w.pools.map((x) => x.maxActiveInstances),
        w.pools.map((x) => x.minIdleInstances),
        w.pools.map((x) => x.targetLatencySeconds),
      ],
    )
  ).rows.map((r) => r.id);
  return { workspaceIds, userIds, poolIds };
}

/**
 * The site's rules, then each workspace's, through the service's `createTaskRule` as an admin
 * (which checks each expression and tag as it does for any admin or owner), in workload order: the
 * analysis reads them back by id. Returns how many were created.
 */
async function createRules(orm: MikroORM, config: Config, w: Workload): Promise<number> {
  const em = orm.em.fork();
  const admin = await em.findOneOrFail(UserSchema, { username: ADMIN_USERNAME });
  const viewer = { kind: 'user', user: admin, isAdmin: true, tokenId: 0 } as const;
  const all = [
    ...w.siteRules.map((rule) => ({ rule, workspace: null })),
    ...w.workspaces.flatMap((s, i) => w.workspaceRules[i].map((rule) => ({ rule, workspace: `${s.scope}/${s.name}` }))),
  ];
  for (const { rule, workspace } of all) await createTaskRule(em, viewer, config.input, { workspace, ...rule });
  return all.length;
}

/** All workers connected and fresh, enabled, not draining; pool workers started a few hours ago. */
async function loadWorkers(c: pg.Client, w: Workload, poolIds: readonly number[]): Promise<number[]> {
  // One JSON document: escaping thousands of large JSON strings into array literals costs seconds.
  const doc = JSON.stringify(
    w.workers.map((x) => ({
      name: x.name,
      type: x.type,
      pool_id: x.pool === null ? null : poolIds[x.pool],
      static_metadata: x.staticMetadata,
      dynamic_metadata: x.dynamicMetadata,
      concurrency: x.concurrency,
      provided_tags: x.tags.providedTags,
      required_tags: x.tags.requiredTags,
      provided_entries: x.tags.provided,
      required_entries: x.tags.required,
      rejected_tags: x.tags.rejected,
    })),
  );
  const rows = await c.query<{ id: number }>(
    `insert into worker (name, type, pool_id, static_metadata, dynamic_metadata, concurrency, enabled, draining, connected_at, last_seen_at, metadata_reported_at, registered_at, instance_created_at,
                         provided_tags, required_tags, provided_entries, required_entries, rejected_tags)
     select name, type, pool_id, static_metadata, dynamic_metadata, concurrency, true, false, now(), now(), now(), now() - interval '30 days',
            case when pool_id is null then null else now() - interval '3 hours' end,
            provided_tags, required_tags, provided_entries, required_entries, rejected_tags
       from rows from (json_to_recordset($1::json) as (name text, type text, pool_id int, static_metadata jsonb, dynamic_metadata jsonb, concurrency int,
                                                       provided_tags text[], required_tags text[], provided_entries jsonb, required_entries jsonb, rejected_tags jsonb))
            with ordinality as v(name, type, pool_id, static_metadata, dynamic_metadata, concurrency, provided_tags, required_tags, provided_entries, required_entries, rejected_tags, o)
      order by o returning id`,
    [doc],
  );
  return rows.rows.map((r) => r.id);
}

/**
 * The queue. Per row only small integers travel (variant, package, creator, priorities); the
 * server assembles the tag arrays (the package tag sorted in, byte order as the analysis sorts),
 * the entries (the package entry appended last; entries are for display) and the taskData.
 */
async function loadQueue(
  c: pg.Client,
  w: Workload,
  ids: DirectoryIds,
  classOfVariant: readonly number[],
  timings: Record<string, number>,
  history: { historyRows: number; workerIds: readonly number[] },
): Promise<number> {
  const n = w.rows.variant.length;
  let p = phase('queue: variants and packages');
  await c.query(`create temp table bench_variant (id int primary key, workspace_id int, task_name text, task_data jsonb, user_required text[],
                   provided text[], required text[], provided_entries jsonb, required_entries jsonb, class_id int)`);
  await c.query(
    `insert into bench_variant
     select o - 1, ws, tn, td::jsonb, string_to_array(ur, ' '), string_to_array(pt, ' '), string_to_array(rt, ' '), pe::jsonb, re::jsonb, cl
       from unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[]) with ordinality as v(ws, tn, td, ur, pt, rt, pe, re, cl, o)`,
    [
      w.variants.map((v) => ids.workspaceIds[v.workspace]),
      w.variants.map((v) => v.taskName),
      w.variants.map((v) => JSON.stringify(v.taskData)),
      w.variants.map((v) => joined(v.userRequiredTags)),
      w.variants.map((v) => joined(v.providedTags)),
      w.variants.map((v) => joined(v.requiredTags)),
      w.variants.map((v) => JSON.stringify(v.providedEntries)),
      w.variants.map((v) => JSON.stringify(v.requiredEntries)),
      classOfVariant,
    ],
  );
  await c.query(`create temp table bench_package (id int primary key, name text)`);
  await c.query(`insert into bench_package select o - 1, n from unnest($1::text[]) with ordinality as v(n, o)`, [
    w.sourcePackages,
  ]);
  await c.query(`create temp table bench_user (id int primary key, user_id int)`);
  await c.query(`insert into bench_user select o - 1, u from unnest($1::int[]) with ordinality as v(u, o)`, [
    ids.userIds,
  ]);
  await c.query('analyze bench_variant; analyze bench_package; analyze bench_user');
  timings.queuePrepare = p.end();

  p = phase('queue: drop secondary indexes');
  const indexes = (
    await c.query<{ name: string; def: string }>(
      `select i.indexname as name, i.indexdef as def from pg_indexes i
        where i.tablename = 'work_request' and i.schemaname = 'public'
          and not exists (select 1 from pg_constraint k where k.conname = i.indexname)`,
    )
  ).rows;
  for (const ix of indexes) await c.query(`drop index "${ix.name}"`);
  timings.dropIndexes = p.end(`${indexes.length} indexes`);

  p = phase('queue: insert', n);
  const now = new Date();
  // The rows are generated consistent with their foreign keys; skipping the per-row FK triggers halves the insert.
  await c.query(`set session_replication_role = replica`);
  for (let start = 0; start < n; start += BATCH_ROWS) {
    const end = Math.min(n, start + BATCH_ROWS);
    const slice = (a: Int32Array) => Array.from(a.subarray(start, end));
    await c.query(
      `insert into work_request (workspace_id, created_by_id, task_type, task_name, task_data, status, priority_base, priority_adjustment,
                                 user_required_tags, provided_tags, required_tags, provided_entries, required_entries, class_id, created_at, pending_at, fair_key)
       select v.workspace_id, u.user_id, 'worker', v.task_name, v.task_data || jsonb_build_object('source_package', p.name), 'PENDING', r.pb, r.pa,
              v.user_required,
              array(select t from unnest(v.provided || ('task:source-package:' || p.name)) t order by t collate "C"),
              v.required,
              v.provided_entries || jsonb_build_array(jsonb_build_object('tag', 'task:source-package:' || p.name, 'provenance', 'system', 'source', 'task-data:source_package')),
              v.required_entries, v.class_id, r.at, r.at, (extract(epoch from r.at) * 1000)::bigint
         from (select x.*, $6::timestamptz - make_interval(secs => $7::float8 * (1 - ($8::int + x.o)::float8 / $9::int)) as at
                 from unnest($1::int[], $2::int[], $3::int[], $4::int[], $5::int[]) with ordinality as x(v, p, u, pb, pa, o)) r
         join bench_variant v on v.id = r.v
         join bench_package p on p.id = r.p
         join bench_user u on u.id = r.u
        order by r.o`,
      [
        slice(w.rows.variant),
        slice(w.rows.sourcePackage),
        slice(w.rows.creator),
        slice(w.rows.priorityBase),
        slice(w.rows.priorityAdjustment),
        now,
        QUEUE_SPAN_SECONDS,
        start,
        n,
      ],
    );
    p.update(end);
  }
  timings.insert = p.end(`${n} requests`);
  // Fair keys (scheduler/rules/queue-order.ts) are the requests' ages in ms, as for workspaces that submit one at a time; each clock follows its last key.
  await c.query(
    `update workspace s set fair_clock = m.last from (select workspace_id, max(fair_key) as last from work_request group by workspace_id) m where s.id = m.workspace_id`,
  );
  if (history.historyRows) {
    p = phase('history: completed requests', history.historyRows);
    await loadHistoryRows(c, history.historyRows, history.workerIds, (done) => p.update(done));
    timings.history = p.end(`${history.historyRows} completed requests`);
  }
  await c.query(`set session_replication_role = origin`);
  // The replica role also turned off the triggers that count pending requests per class (demand reads them).
  await c.query(RECOUNT_PENDING_SQL);

  p = phase('queue: rebuild indexes', indexes.length);
  await c.query(`set maintenance_work_mem = '512MB'`);
  let done = 0;
  for (const ix of indexes) {
    await c.query(ix.def);
    p.update(++done);
  }
  timings.indexes = p.end();
  const [{ first }] = (await c.query<{ first: number }>('select min(id)::int as first from work_request')).rows;
  return first;
}

/**
 * The history of a farm: completed copies of queued requests (same tasks, tags and classes), run by
 * random workers over the last 30 days for 1 to 21 minutes each. Seeded, so runs are comparable.
 */
async function loadHistoryRows(
  c: pg.Client,
  rows: number,
  workerIds: readonly number[],
  progress: (done: number) => void,
): Promise<void> {
  await c.query('select setseed(0.4242)');
  const [{ first, last }] = (
    await c.query<{ first: number; last: number }>(
      `select min(id)::int as first, max(id)::int as last from work_request`,
    )
  ).rows;
  const span = last - first + 1;
  for (let done = 0; done < rows;) {
    const batch = Math.min(BATCH_ROWS, rows - done);
    await c.query(
      `insert into work_request (workspace_id, created_by_id, task_type, task_name, task_data, status, result, priority_base, priority_adjustment,
                                 user_required_tags, provided_tags, required_tags, provided_entries, required_entries, class_id,
                                 created_at, pending_at, assigned_at, started_at, completed_at, worker_id)
       select r.workspace_id, r.created_by_id, r.task_type, r.task_name, r.task_data, 'COMPLETED', 'SUCCESS', r.priority_base, r.priority_adjustment,
              r.user_required_tags, r.provided_tags, r.required_tags, r.provided_entries, r.required_entries, r.class_id,
              h.started - interval '1 minute', h.started - interval '1 minute', h.started, h.started, h.started + make_interval(secs => h.secs),
              ($4::int[])[1 + floor(random() * $5)::int]
         from (select $1::int + ((g.i + $2::int) % $3::int) as id, now() - make_interval(secs => random() * 30 * 86400) as started, 60 + random() * 1200 as secs
                 from generate_series(0, $6::int - 1) as g(i)) h
         join work_request r on r.id = h.id`,
      [first, done, span, `{${workerIds.join(',')}}`, workerIds.length, batch],
    );
    done += batch;
    progress(done);
  }
}

/** What the service keeps at each completion (services/work/work-lifecycle.ts), for the loaded history. */
async function recordHistory(c: pg.Client): Promise<void> {
  await c.query(`update worker w set last_completed_at = h.last
                   from (select worker_id, max(completed_at) as last from work_request where status = 'COMPLETED' group by worker_id) h
                  where h.worker_id = w.id`);
  await c.query(`insert into task_duration (task_type, task_name, day, runs, seconds)
                 select task_type, task_name, (completed_at at time zone 'UTC')::date, count(*), sum(extract(epoch from completed_at - started_at))
                   from work_request where status = 'COMPLETED' group by 1, 2, 3`);
}

const RULE_SOURCE = /^(site|workspace)-rule:/;

/**
 * Compares rows with the service's own analysis of their stored input (`analyzeRequest`: it reads
 * the creator's groups and the site's and workspace's rules from the database, as request creation
 * does), and their class with the real classifier. The rows are 300 random ones plus, for every
 * rule of every workspace, the first row the generator says it gave a tag to, so that each rule
 * that fired is checked even when rare. Returns how many rows were checked and how many
 * (workspace, rule) pairs fired.
 */
async function checkSample(
  c: pg.Client,
  orm: MikroORM,
  config: Config,
  w: Workload,
  ids: DirectoryIds,
  firstId: number,
): Promise<{ rows: number; rules: number }> {
  const n = w.rows.variant.length;
  if (!n) return { rows: 0, rules: 0 };
  const random = new Random(w.seed ^ 0x5eed);
  const sample = new Set(Array.from({ length: Math.min(SAMPLE_CHECKS, n) }, () => firstId + random.int(0, n - 1)));
  const ruleKey = (workspaceId: number, source: string) => `${workspaceId} ${source}`;
  const firstOfRule = new Map<string, number>();
  const ruleKeysOf = w.variants.map((v) =>
    [
      ...new Set([...v.providedEntries, ...v.requiredEntries].map((e) => e.source).filter((s) => RULE_SOURCE.test(s))),
    ].map((s) => ruleKey(ids.workspaceIds[v.workspace], s)),
  );
  for (let i = 0; i < n; i++)
    for (const key of ruleKeysOf[w.rows.variant[i]]) if (!firstOfRule.has(key)) firstOfRule.set(key, firstId + i);
  for (const id of firstOfRule.values()) sample.add(id);
  const rows = (
    await c.query<{
      id: number;
      workspace_id: number;
      created_by_id: number;
      task_name: string;
      task_data: unknown;
      user_required_tags: string[];
      provided_tags: string[];
      required_tags: string[];
      class_id: number;
    }>(
      `select id, workspace_id, created_by_id, task_name, task_data, user_required_tags, provided_tags, required_tags, class_id
         from work_request where id = any($1::int[]) order by id`,
      [[...sample]],
    )
  ).rows;
  const em = orm.em.fork();
  const sources = new AnalysisSources(em);
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((t, i) => t === b[i]);
  const fired = new Set<string>();
  for (const r of rows) {
    const workspace = await em.findOneOrFail(WorkspaceSchema, r.workspace_id, { populate: ['scope'] });
    const creator = await em.findOneOrFail(UserSchema, r.created_by_id);
    const input = {
      workspace,
      creator,
      taskType: 'worker',
      taskName: r.task_name,
      taskData: r.task_data,
      environmentId: null,
      userProvidedTags: [],
      userRequiredTags: r.user_required_tags,
    };
    const analysis = await analyzeRequest(em, config, input, sources);
    if (!analysis.ok) throw new Error(`row ${r.id} does not analyse: ${JSON.stringify(analysis.errors)}`);
    if (!same(analysis.providedTags, r.provided_tags) || !same(analysis.requiredTags, r.required_tags)) {
      throw new Error(
        `row ${r.id}: loaded tags differ from the analysis\n loaded ${JSON.stringify([r.provided_tags, r.required_tags])}\n analysis ${JSON.stringify([analysis.providedTags, analysis.requiredTags])}`,
      );
    }
    for (const e of [...analysis.provided, ...analysis.required])
      if (RULE_SOURCE.test(e.source)) fired.add(ruleKey(r.workspace_id, e.source));
  }
  const missed = [...firstOfRule.keys()].filter((k) => !fired.has(k));
  if (missed.length)
    throw new Error(`rules the generator applied but the analysis did not, on their first row: ${missed.join(', ')}`);
  // Classified again by the real code, in a transaction rolled back so that nothing is written.
  await em.begin();
  try {
    const again = await classIdsFor(
      em,
      rows.map((r) => ({ providedTags: r.provided_tags, requiredTags: r.required_tags })),
    );
    rows.forEach((r, i) => {
      if (again[i] !== r.class_id)
        throw new Error(`row ${r.id}: loaded class ${r.class_id}, classifier says ${again[i]}`);
    });
  } finally {
    await em.rollback();
  }
  return { rows: rows.length, rules: firstOfRule.size };
}
