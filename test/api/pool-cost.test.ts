/**
 * Cost through the API (docs/operating/pools.md, "Cost"): a pool's and an offering's price per hour,
 * the price an instance is recorded at, Instance.cost (by the second, by started period),
 * WorkerPool.monthCost (the part in this month), WorkRequest.cost (its share), the monthly cost
 * budget stopping launches (COST_BUDGET), the pages and the /metrics gauges. Runtimes are faked by
 * SQL on real PostgreSQL; the expected month cost is the TypeScript rule's (rules/pool-cost.ts), so the
 * SQL sum is checked against it.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  createPool,
  createUser,
  createWorkspace,
  ERROR_FIELDS,
  expectResult,
  ok,
  registerWorker,
  snapshot,
  submitOk,
} from '../helpers/fixtures.js';
import { costInMonth, monthStartUtc } from '../../src/scheduler/rules/pool-cost.js';

const t = useTestApp({ provisioner: { enabled: false } });

const POOL = `name pricePerHour monthlyCostBudget monthCost monthRuntimeSeconds billingPeriodSeconds`;
const UPDATE = `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ... on WorkerPool { ${POOL} } ${ERROR_FIELDS} ... on InputError { problems { path message } } } }`;
const CREATE_INSTANCE = `mutation($p: String!, $n: String) { createInstance(input: { pool: $p, name: $n }) { __typename ... on InstanceLaunchPayload { instance { name pricePerHour cost } } } }`;
const INSTANCES = `query($p: String!) { workerPool(name: $p) { ${POOL} instances { edges { node { name pricePerHour cost runtimeSeconds } } } } }`;

let base = '';
beforeAll(async () => {
  base = (await t.app.start()).url.replace(/\/graphql$/, '');
  await createWorkspace(t, 'cost/ws');
});

/** Each instance of a pool by name. */
async function instancesOf(pool: string): Promise<{
  pool: Record<string, unknown>;
  instances: Record<string, { pricePerHour: number | null; cost: number | null }>;
}> {
  const { workerPool } = await ok(t, INSTANCES, { p: pool });
  return {
    pool: workerPool,
    instances: Object.fromEntries(
      workerPool.instances.edges.map((e: { node: { name: string } }) => [e.node.name, e.node]),
    ),
  };
}

/** The instance's times as the database has them, for the TypeScript rule. */
async function times(name: string): Promise<{ requested: Date; end: Date }> {
  const [r] = await t.sql(
    `select requested_at, least(coalesce(terminated_at, now()), now()) as end_at from instance where name = ?`,
    [name],
  );
  return { requested: new Date(r.requested_at as string), end: new Date(r.end_at as string) };
}

describe('cost settings of a pool', () => {
  it('are set, read back, removed with null, and visible to anonymous callers like the runtime', async () => {
    await createPool(t, { name: 'priced' });
    const set = await ok(t, UPDATE, { i: { name: 'priced', pricePerHour: 0.25, monthlyCostBudget: 100 } });
    expect(set.updateWorkerPool).toMatchObject({
      __typename: 'WorkerPool',
      pricePerHour: 0.25,
      monthlyCostBudget: 100,
      monthCost: 0,
    });
    const anonymous = await ok(t, `{ workerPool(name: "priced") { ${POOL} } }`, {}, null);
    expect(anonymous.workerPool).toMatchObject({ pricePerHour: 0.25, monthlyCostBudget: 100, monthCost: 0 });
    const outsider = await createUser(t, 'cost-outsider');
    expect((await ok(t, `{ workerPool(name: "priced") { pricePerHour monthCost } }`, {}, outsider)).workerPool).toEqual(
      { pricePerHour: 0.25, monthCost: 0 },
    );
    const cleared = await ok(t, UPDATE, { i: { name: 'priced', pricePerHour: null, monthlyCostBudget: null } });
    expect(cleared.updateWorkerPool).toMatchObject({ pricePerHour: null, monthlyCostBudget: null });
  });

  it('an offering’s price is kept and shown, beside what it costs at (a spot maximum, or the pool’s)', async () => {
    await createPool(t, {
      name: 'offered',
      providerType: 'ec2',
      providerAccount: {
        accessKeyId: 'AKIAZ7TAGSCHEDTEST01',
        secretAccessKey: 'not-a-real-secret-0123456789abcdef0123',
        region: 'eu-central-1',
      },
      pricePerHour: 0.3,
      specifications: {
        providerImage: 'ami-0abcdef1234567890',
        subnetId: 'subnet-01234567',
        securityGroupIds: ['sg-01234567'],
        offerings: [
          { instanceType: 'c6i.large', market: 'on-demand', pricePerHour: 0.1 },
          { instanceType: 'c6i.large', market: 'spot', maxPricePerHour: 0.05 },
          { instanceType: 'c6i.xlarge', market: 'on-demand' },
        ],
      },
    });
    const r = await ok(
      t,
      `{ workerPool(name: "offered") { specifications { offerings { pricePerHour } } offerings { pricePerHour market } } }`,
    );
    expect(r.workerPool.specifications.offerings).toEqual([
      { pricePerHour: 0.1 },
      { pricePerHour: null },
      { pricePerHour: null },
    ]);
    expect(r.workerPool.offerings).toEqual([
      { pricePerHour: 0.1, market: 'on-demand' },
      { pricePerHour: 0.05, market: 'spot' },
      { pricePerHour: 0.3, market: 'on-demand' },
    ]);
  });

  it('refuses every bad value with its path, and writes nothing', async () => {
    await createPool(t, { name: 'bad-cost' });
    const before = await snapshot(t, ['worker_pool']);
    const r = await ok(t, UPDATE, {
      i: {
        name: 'bad-cost',
        pricePerHour: -0.01,
        monthlyCostBudget: -1,
        specifications: {
          offerings: [
            { instanceType: 'cx22', pricePerHour: 1e7 },
            { instanceType: 'cx32', pricePerHour: -1 },
          ],
        },
      },
    });
    expect(r.updateWorkerPool.__typename).toBe('InputError');
    expect((r.updateWorkerPool.problems as { path: string }[]).map((p) => p.path).sort()).toEqual(
      [
        'input.monthlyCostBudget',
        'input.pricePerHour',
        'input.specifications.offerings[0].pricePerHour',
        'input.specifications.offerings[1].pricePerHour',
      ].sort(),
    );
    const huge = await ok(t, UPDATE, { i: { name: 'bad-cost', pricePerHour: 1e308, monthlyCostBudget: 1e308 } });
    expect((huge.updateWorkerPool.problems as { path: string }[]).map((p) => p.path).sort()).toEqual([
      'input.monthlyCostBudget',
      'input.pricePerHour',
    ]);
    // A price nearer 0 than any real one (PostgreSQL would underflow summing it): refused.
    const tiny = await ok(t, UPDATE, {
      i: {
        name: 'bad-cost',
        pricePerHour: 5e-324,
        specifications: { offerings: [{ instanceType: 'cx22', pricePerHour: 1e-12 }] },
      },
    });
    expect(
      (tiny.updateWorkerPool.problems as { path: string; message: string }[]).map((p) => p.message).sort(),
    ).toEqual([
      'input.pricePerHour: must be 0 or from 1e-9 to 1000000',
      'input.specifications.offerings[0].pricePerHour: must be 0 or from 1e-9 to 1000000',
    ]);
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
    // Not a number at all: GraphQL refuses it, not a 500.
    const nan = await t.gql(UPDATE, { i: { name: 'bad-cost', pricePerHour: 'NaN' } });
    expect(nan.status).toBeLessThan(500);
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
  });
});

describe('the cost of instances', () => {
  it('by the second, and by started period; an instance keeps the price it was launched at', async () => {
    await createPool(t, {
      name: 'hourly',
      pricePerHour: 0.5,
      billingPeriodSeconds: 3600,
      specifications: { concurrency: 2 },
    });
    await createPool(t, { name: 'secondly', pricePerHour: 0.5 });
    for (const [pool, name] of [
      ['hourly', 'hourly-1'],
      ['secondly', 'secondly-1'],
    ])
      expect(await expectResult(t, 'InstanceLaunchPayload', CREATE_INSTANCE, { p: pool, n: name })).toMatchObject({
        instance: { name, pricePerHour: 0.5 },
      });
    expect(
      await t.sql(`select name, price_per_hour from instance where name in ('hourly-1', 'secondly-1') order by name`),
    ).toEqual([
      { name: 'hourly-1', price_per_hour: 0.5 },
      { name: 'secondly-1', price_per_hour: 0.5 },
    ]);
    // 65 minutes of runtime, ended 5 minutes ago.
    await t.sql(
      `update instance set requested_at = now() - interval '70 minutes', terminated_at = now() - interval '5 minutes', state = 'TERMINATED' where name in ('hourly-1', 'secondly-1')`,
    );
    // The pools' prices change: the instances keep theirs.
    await ok(t, UPDATE, { i: { name: 'hourly', pricePerHour: 9 } });
    await ok(t, UPDATE, { i: { name: 'secondly', pricePerHour: 9 } });
    const hourly = await instancesOf('hourly');
    expect(hourly.instances['hourly-1']).toMatchObject({ pricePerHour: 0.5 });
    expect(hourly.instances['hourly-1'].cost).toBeCloseTo(1.0, 6); // two started hours at 0.5
    const secondly = await instancesOf('secondly');
    expect(secondly.instances['secondly-1'].cost).toBeCloseTo((0.5 * 65) / 60, 6);

    // The month's cost is the TypeScript rule's, summed by the SQL.
    const now = new Date();
    for (const [pool, name, period] of [
      [hourly, 'hourly-1', 3600],
      [secondly, 'secondly-1', null],
    ] as const) {
      const { requested, end } = await times(name);
      expect(pool.pool.monthCost).toBeCloseTo(costInMonth(0.5, requested, end, monthStartUtc(now), period), 6);
    }

    // An instance recorded without a price (before its pool had one) is costed at its pool's price now.
    await t.sql(`update instance set price_per_hour = null where name = 'secondly-1'`);
    const repriced = await instancesOf('secondly');
    expect(repriced.instances['secondly-1']).toMatchObject({ pricePerHour: 9 });
    expect(repriced.instances['secondly-1'].cost).toBeCloseTo((9 * 65) / 60, 6);
  });

  it('the month’s cost counts only the part in this month', async () => {
    await createPool(t, { name: 'across', pricePerHour: 3600 });
    await expectResult(t, 'InstanceLaunchPayload', CREATE_INSTANCE, { p: 'across', n: 'across-1' });
    // Half an hour before this month began to one second into it: 1801 s in all, 1 s in this month.
    await t.sql(
      `update instance set requested_at = (date_trunc('month', now() at time zone 'UTC') at time zone 'UTC') - interval '30 minutes',
              terminated_at = (date_trunc('month', now() at time zone 'UTC') at time zone 'UTC') + interval '1 second', state = 'TERMINATED' where name = 'across-1'`,
    );
    const { pool, instances } = await instancesOf('across');
    expect(instances['across-1'].cost).toBeCloseTo(1801, 6);
    expect(pool.monthCost).toBeCloseTo(1, 6);
  });

  it('a work request’s share: the price × its run time ÷ its worker’s concurrency; null without an instance', async () => {
    // hourly-1's worker has concurrency 2 and the price 0.5; a static worker has no instance.
    await registerWorker(t, 'cost-static');
    const onInstance = (await submitOk(t, { workspace: 'cost/ws', taskType: 'worker', taskName: 'noop', taskData: {} }))
      .id;
    const onStatic = (await submitOk(t, { workspace: 'cost/ws', taskType: 'worker', taskName: 'noop', taskData: {} }))
      .id;
    for (const [id, worker] of [
      [onInstance, 'hourly-1'],
      [onStatic, 'cost-static'],
    ])
      await t.sql(
        `update work_request set status = 'COMPLETED', result = 'SUCCESS', worker_id = (select id from worker where name = ?),
                assigned_at = now() - interval '2 hours', started_at = now() - interval '2 hours', completed_at = now() - interval '1 hour' where id = ?`,
        [worker, Number(id)],
      );
    const r = await ok(
      t,
      `query($a: ID!, $b: ID!) { a: workRequest(id: $a) { cost } b: workRequest(id: $b) { cost } }`,
      { a: onInstance, b: onStatic },
    );
    expect(r.a.cost).toBeCloseTo(0.25, 6);
    expect(r.b.cost).toBeNull();
    const page = await (
      await fetch(`${base}/-/status/work-requests/${onInstance}/`, {
        headers: { authorization: `Bearer ${t.adminToken}` },
      })
    ).text();
    expect(page).toContain('<dt>Cost</dt><dd>0.25');
  });
});

describe('the monthly cost budget', () => {
  it('stops launches once the month’s cost reaches it (COST_BUDGET), in demand, the diagnosis, the pages and /metrics', async () => {
    await createPool(t, { name: 'budgeted', providedTags: ['site:budgeted'], pricePerHour: 1, monthlyCostBudget: 100 });
    const id = (
      await submitOk(t, {
        workspace: 'cost/ws',
        taskType: 'worker',
        taskName: 'noop',
        taskData: {},
        requiredTags: ['site:budgeted'],
      })
    ).id;
    const DEMAND = `{ provisioningDemand { pools { pool { name } launch limitedBy monthCost } } }`;
    const demandOf = async () =>
      (await ok(t, DEMAND)).provisioningDemand.pools.find(
        (p: { pool: { name: string } }) => p.pool.name === 'budgeted',
      );
    expect(await demandOf()).toMatchObject({ launch: 1, limitedBy: [], monthCost: 0 });

    // An instance that ran 100 hours this month at 1 an hour.
    await expectResult(t, 'InstanceLaunchPayload', CREATE_INSTANCE, { p: 'budgeted', n: 'budgeted-1' });
    await t.sql(
      `update instance set requested_at = greatest(now() - interval '100 hours', date_trunc('month', now() at time zone 'UTC') at time zone 'UTC'), terminated_at = now(), state = 'TERMINATED' where name = 'budgeted-1'`,
    );
    await t.sql(`update worker set terminated_at = now() where name = 'budgeted-1'`);
    const [{ used }] = await t.sql(
      `select extract(epoch from terminated_at - requested_at)::float / 3600 as used from instance where name = 'budgeted-1'`,
    );
    await ok(t, UPDATE, { i: { name: 'budgeted', monthlyCostBudget: Number(used) - 0.01 } });
    const over = await demandOf();
    expect(over).toMatchObject({ launch: 0, limitedBy: ['COST_BUDGET'] });
    expect(over.monthCost).toBeCloseTo(Number(used), 3);
    const diagnosis = (
      await ok(t, `query($id: ID!) { workRequest(id: $id) { diagnosis { pools { pool atLimit } } } }`, { id })
    ).workRequest.diagnosis;
    expect(diagnosis.pools).toEqual([{ pool: 'budgeted', atLimit: ['COST_BUDGET'] }]);

    const pagesAuth = { headers: { authorization: `Bearer ${t.adminToken}` } };
    const poolPage = await (await fetch(`${base}/-/status/pools/budgeted/`, pagesAuth)).text();
    expect(poolPage).toContain('<dt>Cost this month</dt>');
    expect(poolPage).toMatch(/of \d+\.\d\d \(100 %\)/);
    const requestPage = await (await fetch(`${base}/-/status/work-requests/${id}/`, pagesAuth)).text();
    expect(requestPage).toContain('out of its monthly cost budget');

    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^tagsched_pool_month_cost\{pool="budgeted"\} \d+(\.\d+)?$/m);
    expect(metrics).toContain(`tagsched_pool_month_cost_budget{pool="budgeted"} ${Number(used) - 0.01}`);
    expect(metrics).toMatch(/^tagsched_pool_launch_limited\{pool="budgeted",limit="COST_BUDGET"\} 1$/m);
    // A pool without a budget has a cost gauge and no budget gauge.
    expect(metrics).toMatch(/^tagsched_pool_month_cost\{pool="secondly"\} /m);
    expect(metrics).not.toContain('tagsched_pool_month_cost_budget{pool="secondly"}');

    // The budget raised: it launches again.
    await ok(t, UPDATE, { i: { name: 'budgeted', monthlyCostBudget: Number(used) + 10 } });
    expect(await demandOf()).toMatchObject({ launch: 1, limitedBy: [] });
  });
});
