import { describe, expect, it } from 'vitest';
import { availableParams } from '../../src/scheduler/rules/availability.js';
import { mayFitParams } from '../../src/scheduler/rules/fit.js';
import { executeInOneTrip } from '../../src/storage/db/one-trip.js';
import { FREE_FOR_CLASS_SQL, freeForClassTrip } from '../../src/scheduler/storage/place.js';
import { DUE_FOR_PROBE_SQL } from '../../src/services/work/quarantine-probes.js';
import { useTestApp } from '../helpers/app.js';
import { AMD64_METADATA } from '../helpers/fixtures.js';

// No pass runs here (an hour's debounce and interval, app.start() never called).
const t = useTestApp({ scheduler: { automatic: true, passDebounceMs: 3_600_000, passIntervalMs: 3_600_000 } });

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

describe("placing a new request walks the workers in the placement order and stops, whatever the planner's costs say", () => {
  it('reads the index worker_placement_order without a sort or compiling even when the planner would rather sort every available worker', async () => {
    await t.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const reg = await t.gql(
      `mutation { registerWorker(input: { name: "plan-0" }) { ... on WorkerTokenPayload { token } } }`,
    );
    const token = reg.data!.registerWorker.token as string;
    await t.gql(
      `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
      { m: AMD64_METADATA },
      token,
    );
    const created = await t.gql(
      `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "sbuild", taskData: { source_package: "hello", host_architecture: "amd64" } }) { ... on WorkRequest { id } ... on Error { message } } }`,
    );
    const id = Number(created.data!.createWorkRequest.id);
    expect(id, JSON.stringify(created)).toBeGreaterThan(0);
    const [cls] = await t.sql<{ id: number; required_tags: string[]; significant_provided_tags: string[] }>(
      `select c.id, to_json(c.required_tags) as required_tags, to_json(c.significant_provided_tags) as significant_provided_tags
         from task_class c join work_request r on r.class_id = c.id where r.id = ?`,
      [id],
    );
    // The placement, which runs with these settings, placed it on the one worker there is.
    const [row] = await t.sql<{ status: string; worker: string | null }>(
      `select r.status, w.name as worker from work_request r left join worker w on w.id = r.worker_id where r.id = ?`,
      [id],
    );
    expect(row).toEqual({ status: 'ASSIGNED', worker: 'plan-0' });
    // 5,000 more available workers like it, stored in no particular order (as rows updated over time
    // are), and analysed while their tags were still empty, as a pool's registrations leave them (their
    // metadata reports come later): the planner then takes the tag test for a rare one.
    await t.sql(
      `insert into worker (id, name, type, registered_at, connected_at, metadata_reported_at, last_seen_at, provided_tags, required_tags)
       select 1000 + g, 'plan-' || g, 'worker', now(), now(), now(), now(), '{}', '{}' from generate_series(1, 5000) g order by random()`,
    );
    await t.sql(`analyze worker`);
    await t.sql(
      `update worker set provided_tags = (select provided_tags from worker where name = 'plan-0') where name <> 'plan-0'`,
    );
    const params = [
      ...availableParams(new Date(), t.app.config.workers.metadataFreshMs),
      ...mayFitParams({
        id: cls.id,
        requiredTags: cls.required_tags,
        significantProvidedTags: cls.significant_provided_tags,
      }),
    ];
    await t.app.orm.em.fork().transactional(async (tx) => {
      const planOf = (rows: { 'QUERY PLAN': { Plan: PlanNode }[] }[]) => nodes(rows[0]['QUERY PLAN'][0].Plan);
      const explainSql = `explain (format json) ${FREE_FOR_CLASS_SQL}`;
      // Index reads made dear too (a cold cache, slow disks): left to itself, the planner sorts every available worker.
      await tx.execute(`select set_config('random_page_cost', '100', true), set_config('enable_sort', 'on', true)`);
      expect(planOf(await tx.execute(explainSql, params)).map((n) => n['Node Type'])).toContain('Sort');
      // The placement's trip, its walk explained: no sort, the index read in order.
      const [, explained] = await executeInOneTrip<[unknown[], { 'QUERY PLAN': { Plan: PlanNode }[] }[], unknown[]]>(
        tx,
        freeForClassTrip(params, explainSql),
      );
      const plan = planOf(explained);
      expect(plan.map((n) => n['Node Type'])).not.toContain('Sort');
      expect(plan.find((n) => n['Node Type'] === 'Index Scan')?.['Index Name']).toBe('worker_placement_order');
      // Within the trip the walk plans with sorts and compiling (JIT) off; after it, both are what they were, for either value.
      const settings = `select current_setting('enable_sort') as sort, current_setting('jit') as jit`;
      for (const was of ['on', 'off']) {
        await tx.execute(`select set_config('enable_sort', ?, true), set_config('jit', ?, true)`, [was, was]);
        const [, during] = await executeInOneTrip<[unknown[], { sort: string; jit: string }[], unknown[]]>(
          tx,
          freeForClassTrip([], settings),
        );
        expect(during).toEqual([{ sort: 'off', jit: 'off' }]);
        expect(await tx.execute(settings)).toEqual([{ sort: was, jit: was }]);
      }
    });

    // The quarantine probes' look for due workers reads the few quarantined ones, not every worker.
    await t.sql(`update worker set quarantined_at = now() - interval '1 hour' where name = 'plan-17'`);
    await t.sql(`analyze worker`);
    const due = await t.sql<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(`explain (format json) ${DUE_FOR_PROBE_SQL}`, [
      ...availableParams(new Date(), t.app.config.workers.metadataFreshMs),
      new Date(),
    ]);
    const probePlan = nodes(due[0]['QUERY PLAN'][0].Plan);
    expect(probePlan.map((n) => n['Node Type'])).not.toContain('Seq Scan');
    expect(probePlan.some((n) => n['Index Name'] === 'worker_quarantined')).toBe(true);
  });
});
