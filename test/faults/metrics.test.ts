import type { PromData, PromHistogramData, PromMetrics } from 'prom2javascript';
import { describe, expect, it } from 'vitest';
import { parseMetrics } from '../helpers/metrics.js';
import { settled, until, useFleet } from './harness.js';

// /metrics of real server processes, parsed by a Prometheus text-format parser, after a scripted
// workload of real requests run by real agents: the counters agree with what the database recorded.
const f = useFleet();

const SCRAPER_TOKEN = 'scraper-token-0123456789abcdef';
// A noop whose taskData says {"result": false} fails: the handler reads the task from its stdin.
const FAIL_WHEN_ASKED = `if grep -q '"result":false'; then echo "asked to fail"; exit 1; fi`;

async function scrape(
  graphqlUrl: string,
  token?: string,
): Promise<{ status: number; text: string; metrics: PromMetrics }> {
  const res = await fetch(graphqlUrl.replace(/\/graphql$/, '/metrics'), {
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  const text = await res.text();
  const metrics = res.status === 200 ? await parseMetrics(text) : {};
  return { status: res.status, text, metrics };
}

/** The samples of a counter or gauge, as label set (JSON) → value. */
function samples(metrics: PromMetrics, name: string): Map<string, number> {
  const family = metrics[name];
  expect(family, `${name} is served`).toBeDefined();
  return new Map((family.data as PromData[]).map((d) => [JSON.stringify(d.labels), d.value]));
}

function histogram(metrics: PromMetrics, name: string): PromHistogramData[] {
  expect(metrics[name]?.type, `${name} is a histogram`).toBe('histogram');
  return metrics[name].data as PromHistogramData[];
}

const total = (m: Map<string, number>) => [...m.values()].reduce((s, v) => s + v, 0);
const key = (labels: Record<string, string>) => JSON.stringify(labels);

async function createRequest(
  url: string,
  workspace: string,
  taskName: string,
  taskData: unknown,
  dependsOn?: string[],
): Promise<string> {
  const r = await f.gql(
    url,
    `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { __typename ... on WorkRequest { id } ... on Error { code message } } }`,
    {
      i: { workspace, taskType: 'worker', taskName, taskData, dependsOn },
    },
  );
  expect(r.data?.createWorkRequest.__typename, JSON.stringify(r)).toBe('WorkRequest');
  return r.data!.createWorkRequest.id as string;
}

describe.sequential('/metrics', () => {
  it('after a workload, its counters and gauges agree with the database, and private workspaces stay unnamed', async () => {
    const server = await f.server();
    await f.gql(
      server.url,
      `mutation { createWorkspace(input: { name: "hidden/team-secret", isPublic: false }) { __typename } }`,
    );
    await f.agent({ name: 'm-a', url: server.url, concurrency: 2, output: FAIL_WHEN_ASKED });
    await f.agent({ name: 'm-b', url: server.url, output: FAIL_WHEN_ASKED });

    const noops = [];
    for (let i = 0; i < 9; i++)
      noops.push(await createRequest(server.url, 'debian/main', 'noop', i % 3 === 0 ? { result: false } : {}));
    // Work no agent can run (no agent has an sbuild handler), one of it in the private workspace, and one request waiting on it.
    const stuck = await createRequest(server.url, 'hidden/team-secret', 'sbuild', {
      source_package: 'hello',
      host_architecture: 'amd64',
    });
    await createRequest(server.url, 'debian/main', 'sbuild', { source_package: 'hello', host_architecture: 'arm64' });
    await createRequest(server.url, 'hidden/team-secret', 'noop', {}, [stuck]);
    const final = await settled(f, noops);
    expect(final.map((s) => s.result).sort()).toEqual([...Array(3).fill('FAILURE'), ...Array(6).fill('SUCCESS')]);
    // The agents have reported every result (the log of each completion is in the database by now).
    await until(
      'both agents to be idle',
      async () =>
        (await f.sql(`select count(*)::int as n from work_request where status in ('ASSIGNED', 'RUNNING')`))[0].n === 0,
    );

    // A completion is counted right after its commit: scrape until all nine are (they are at once, as a rule).
    const counted = (m: PromMetrics) =>
      (m.tagsched_work_request_run_seconds?.data as PromHistogramData[] | undefined)?.reduce(
        (s, h) => s + h.count,
        0,
      ) === 9;
    const { text, metrics } = await until('the nine completions to be counted', async () => {
      const s = await scrape(server.url);
      expect(s.status, s.text).toBe(200);
      return counted(s.metrics) && s;
    });
    expect(text).not.toMatch(/team-secret|hidden\//);

    // Assignments: one per request that was ever assigned (nothing was re-queued here), and as many latencies.
    const [{ assigned }] = await f.sql(
      `select count(*)::int as assigned from work_request where assigned_at is not null`,
    );
    const assignments = samples(metrics, 'tagsched_assignments_total');
    expect(total(assignments)).toBe(assigned);
    expect(histogram(metrics, 'tagsched_assignment_latency_seconds').reduce((s, h) => s + h.count, 0)).toBe(assigned);
    expect(total(samples(metrics, 'tagsched_scheduler_passes_total'))).toBeGreaterThanOrEqual(0);

    // Completions by task and result, as the database has them.
    const completed = await f.sql<{ task_name: string; result: string; n: number }>(
      `select task_name, result, count(*)::int as n from work_request where status = 'COMPLETED' group by 1, 2`,
    );
    const runs = histogram(metrics, 'tagsched_work_request_run_seconds');
    expect(Object.fromEntries(runs.map((h) => [`${h.labels.task}/${h.labels.result}`, h.count]))).toEqual(
      Object.fromEntries(completed.map((c) => [`${c.task_name}/${c.result}`, c.n])),
    );

    // The agents name their operations: each acknowledgement and each result is one mutation.
    const operations = histogram(metrics, 'tagsched_graphql_request_duration_seconds');
    const countOf = (operation: string) =>
      operations.find((h) => h.labels.operation === operation && h.labels.type === 'mutation')?.count ?? 0;
    expect(countOf('StartWorkRequest')).toBe(9);
    expect(countOf('CompleteWorkRequest')).toBe(9);
    expect(countOf('AppendWorkRequestLog')).toBeGreaterThanOrEqual(3); // the failing runs wrote a line each

    // Unfinished requests by workspace and status; the private workspace is one folded label value.
    const unfinished = await f.sql<{ workspace: string; is_public: boolean; status: string; n: number }>(
      `select s.name || '/' || w.name as workspace, w.is_public, r.status, count(*)::int as n
         from work_request r join workspace w on w.id = r.workspace_id join scope s on s.id = w.scope_id
        where r.status in ('BLOCKED', 'PENDING', 'ASSIGNED', 'RUNNING') group by 1, 2, 3`,
    );
    expect(Object.fromEntries(samples(metrics, 'tagsched_work_requests'))).toEqual(
      Object.fromEntries(
        unfinished.map((u) => [key({ workspace: u.is_public ? u.workspace : '(private)', status: u.status }), u.n]),
      ),
    );
    expect(samples(metrics, 'tagsched_work_requests').get(key({ workspace: '(private)', status: 'BLOCKED' }))).toBe(1);

    // Pending by class: one series per class with pending work.
    // Labelled with the class's task (worker:task:TYPE:NAME:…) and architecture (worker:build-arch:ARCH), read here from the class's tags.
    const byClass = await f.sql<{ class_id: number; n: number; task: string; architecture: string }>(
      `select w.class_id, count(*)::int as n,
              coalesce((select split_part(t, ':', 3) || ':' || split_part(t, ':', 4) from unnest(c.required_tags) t where t like 'worker:task:%' limit 1), '') as task,
              coalesce((select substr(t, length('worker:build-arch:') + 1) from unnest(c.required_tags) t where t like 'worker:build-arch:%' limit 1), '') as architecture
         from work_request w join task_class c on c.id = w.class_id where w.status = 'PENDING' group by w.class_id, c.required_tags`,
    );
    expect(byClass.every((c) => c.task !== '')).toBe(true);
    expect(Object.fromEntries(samples(metrics, 'tagsched_pending_work_requests'))).toEqual(
      Object.fromEntries(
        byClass.map((c) => [key({ class: String(c.class_id), task: c.task, architecture: c.architecture }), c.n]),
      ),
    );
    expect(samples(metrics, 'tagsched_unschedulable_work_requests').get(key({}))).toBe(2);

    // Workers by status and pool, as the API shows them.
    const workers = await f.gql(server.url, `{ workers(first: 100) { edges { node { status pool { name } } } } }`);
    const expected = new Map<string, number>();
    for (const { node } of workers.data!.workers.edges as {
      node: { status: string; pool: { name: string } | null };
    }[]) {
      const k = key({ status: node.status, pool: node.pool?.name ?? '' });
      expected.set(k, (expected.get(k) ?? 0) + 1);
    }
    expect(samples(metrics, 'tagsched_workers')).toEqual(expected);
    expect(samples(metrics, 'tagsched_workers').get(key({ status: 'IDLE', pool: '' }))).toBe(2);

    // Both agents hold one WebSocket each.
    expect(samples(metrics, 'tagsched_websocket_connections').get(key({ viewer: 'worker' }))).toBe(2);

    // A second process with a scraper token: it refuses anonymous scrapes, names every workspace,
    // and reads the same database gauges; its own counters start from nothing.
    const guarded = await f.server({ TAGSCHED_METRICS_TOKEN: SCRAPER_TOKEN }, 'guarded');
    expect((await scrape(guarded.url)).status).toBe(401);
    expect((await scrape(guarded.url, 'a-wrong-token-of-some-length')).status).toBe(401);
    const named = await scrape(guarded.url, SCRAPER_TOKEN);
    expect(named.status).toBe(200);
    const requests = samples(named.metrics, 'tagsched_work_requests');
    expect(requests.get(key({ workspace: 'hidden/team-secret', status: 'PENDING' }))).toBe(1);
    expect(requests.get(key({ workspace: 'hidden/team-secret', status: 'BLOCKED' }))).toBe(1);
    expect(total(requests)).toBe(total(samples(metrics, 'tagsched_work_requests')));
    expect(samples(named.metrics, 'tagsched_pending_work_requests')).toEqual(
      samples(metrics, 'tagsched_pending_work_requests'),
    );
    expect(samples(named.metrics, 'tagsched_assignments_total').size).toBe(0);
  }, 180_000);

  it('/livez and /readyz answer beside /healthz', async () => {
    const server = await f.server();
    const base = server.url.replace(/\/graphql$/, '');
    const live = await fetch(`${base}/livez`);
    expect([live.status, await live.json()]).toEqual([200, { status: 'ok' }]);
    const ready = await fetch(`${base}/readyz`);
    expect([ready.status, await ready.json()]).toEqual([
      200,
      { status: 'ok', checks: { database: 'ok', migrations: 'ok', shuttingDown: false } },
    ]);
    // A migration this code knows is gone from the database (a restored old backup): not ready.
    const [last] = await f.sql(`select name from mikro_orm_migrations order by id desc limit 1`);
    await f.sql(`update mikro_orm_migrations set name = name || '-renamed' where name = $1`, [last.name]);
    try {
      const stale = await fetch(`${base}/readyz`);
      expect([stale.status, await stale.json()]).toEqual([
        503,
        { status: 'not ready', checks: { database: 'ok', migrations: '1 not applied', shuttingDown: false } },
      ]);
      expect((await fetch(`${base}/livez`)).status).toBe(200);
    } finally {
      await f.sql(`update mikro_orm_migrations set name = $1 where name = $2`, [last.name, `${last.name}-renamed`]);
    }
  }, 120_000);
});
