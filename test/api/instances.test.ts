/**
 * Instances kept by hand (TAGSCHED_PROVISIONER=off): a site's own script records an instance
 * (createInstance: its worker and a one-shot activation token bound to it), starts the machine,
 * records the provider's id, and records the end; the agent's activateWorker binds to the worker
 * made for it; the instance is RUNNING once its worker connects.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createPool, createUser, ERROR_FIELDS, expectResult, ok, reportMetadata } from '../helpers/fixtures.js';

const t = useTestApp({ provisioner: { enabled: false } });

const INSTANCE =
  'name providerId state error requestedAt startedAt stoppingAt terminatedAt runtimeSeconds pool { name } worker { name status concurrency }';
const CREATE = `mutation($p: String!, $n: String) { createInstance(input: { pool: $p, name: $n }) { __typename ... on InstanceLaunchPayload { activationToken instance { ${INSTANCE} } } ${ERROR_FIELDS} } }`;
const ACTIVATE = `mutation($n: String) { activateWorker(input: { name: $n }) { __typename ... on WorkerTokenPayload { token worker { name pool { name } } } ${ERROR_FIELDS} } }`;
const LAUNCHED = `mutation($n: String!, $id: String!) { recordInstanceLaunched(input: { name: $n, providerId: $id }) { __typename ... on Instance { ${INSTANCE} } ${ERROR_FIELDS} } }`;
const STOPPED = `mutation($n: String!, $e: String) { recordInstanceStopped(input: { name: $n, error: $e }) { __typename ... on Instance { ${INSTANCE} } ${ERROR_FIELDS} } }`;

describe('instances recorded by a site script', () => {
  it('live through LAUNCHING, RUNNING and TERMINATED, and their worker is the one their agent activates', async () => {
    await createPool(t, { name: 'manual', specifications: { concurrency: 2 } });
    const created = await expectResult(t, 'InstanceLaunchPayload', CREATE, { p: 'manual', n: 'manual-1' });
    expect(created.activationToken).toMatch(/^tsk_activation_/);
    expect(created.instance).toMatchObject({
      name: 'manual-1',
      providerId: null,
      state: 'LAUNCHING',
      startedAt: null,
      pool: { name: 'manual' },
      worker: { name: 'manual-1', status: 'DISCONNECTED', concurrency: 2 },
    });

    expect(await expectResult(t, 'Instance', LAUNCHED, { n: 'manual-1', id: 'i-0abc' })).toMatchObject({
      providerId: 'i-0abc',
      state: 'LAUNCHING',
    });

    // The agent asks for another name: refused, and the token is not spent.
    const wrong = await ok(t, ACTIVATE, { n: 'someone-else' }, created.activationToken);
    expect(wrong.activateWorker).toMatchObject({ code: 'INVALID_INPUT', path: 'input.name' });
    const activated = await expectResult(t, 'WorkerTokenPayload', ACTIVATE, { n: 'manual-1' }, created.activationToken);
    expect(activated.worker).toEqual({ name: 'manual-1', pool: { name: 'manual' } });
    // One shot.
    expect((await t.gql(ACTIVATE, { n: 'manual-1' }, created.activationToken)).status).toBe(401);
    expect(
      await t.sql(
        `select count(*)::int as n from worker where pool_id = (select id from worker_pool where name = 'manual')`,
      ),
    ).toEqual([{ n: 1 }]);

    // Its worker connects: RUNNING.
    await reportMetadata(t, activated.token, { architectures: ['amd64'] });
    const { workerPool } = await ok(
      t,
      `{ workerPool(name: "manual") { instances { edges { node { ${INSTANCE} } } } } }`,
    );
    const [running] = workerPool.instances.edges.map((e: { node: Record<string, unknown> }) => e.node);
    expect(running).toMatchObject({ state: 'RUNNING', worker: { status: 'IDLE' } });
    expect(running.startedAt).not.toBeNull();

    const stopped = await expectResult(t, 'Instance', STOPPED, { n: 'manual-1' });
    expect(stopped).toMatchObject({ state: 'TERMINATED', error: null, worker: { status: 'INACTIVE' } });
    expect(stopped.runtimeSeconds).toBeGreaterThanOrEqual(0);
    expect((await t.gql(`mutation { heartbeat(input: {}) { __typename } }`, {}, activated.token)).status).toBe(401);
    // Recorded again: answered as it is.
    expect(await expectResult(t, 'Instance', STOPPED, { n: 'manual-1', e: 'late' })).toMatchObject({
      state: 'TERMINATED',
      error: null,
    });
  });

  it('FAILED with the error; an unused activation token of a terminated instance is refused', async () => {
    await createPool(t, { name: 'manual-f' });
    const created = await expectResult(t, 'InstanceLaunchPayload', CREATE, { p: 'manual-f' });
    expect(created.instance.name).toMatch(/^manual-f-[0-9a-f]{8}$/);
    const failed = await expectResult(t, 'Instance', STOPPED, {
      n: created.instance.name,
      e: 'quota exceeded (InstanceLimitExceeded)',
    });
    expect(failed).toMatchObject({
      state: 'FAILED',
      error: 'quota exceeded (InstanceLimitExceeded)',
      worker: { status: 'INACTIVE' },
    });
    expect((await t.gql(ACTIVATE, {}, created.activationToken)).status).toBe(401);
  });

  it('pages a pool’s instances newest first, and filters them by state', async () => {
    await createPool(t, { name: 'manual-p' });
    for (const n of ['manual-p-1', 'manual-p-2', 'manual-p-3'])
      await expectResult(t, 'InstanceLaunchPayload', CREATE, { p: 'manual-p', n });
    await expectResult(t, 'Instance', STOPPED, { n: 'manual-p-2' });
    const page = async (after: string | null, states?: string[]) =>
      (
        await ok(
          t,
          `query($a: String, $s: [InstanceState!]) { workerPool(name: "manual-p") { instances(first: 2, after: $a, states: $s) { edges { node { name } } pageInfo { hasNextPage endCursor } } } }`,
          { a: after, s: states ?? null },
        )
      ).workerPool.instances;
    const first = await page(null);
    expect(first.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual(['manual-p-3', 'manual-p-2']);
    const second = await page(first.pageInfo.endCursor);
    expect(second.edges.map((e: { node: { name: string } }) => e.node.name)).toEqual(['manual-p-1']);
    expect(second.pageInfo.hasNextPage).toBe(false);
    expect((await page(null, ['LAUNCHING'])).edges.map((e: { node: { name: string } }) => e.node.name)).toEqual([
      'manual-p-3',
      'manual-p-1',
    ]);
  });

  it.each([
    ['an unknown pool', CREATE, { p: 'nope' }, 'NOT_FOUND'],
    ['a taken name', CREATE, { p: 'manual-p', n: 'manual-p-1' }, 'ALREADY_EXISTS'],
    ['a bad name', CREATE, { p: 'manual-p', n: 'a/b' }, 'INVALID_INPUT'],
    ['a name with a NUL', CREATE, { p: 'manual-p', n: 'a\u0000' }, 'INVALID_INPUT'],
    ['an unknown instance', LAUNCHED, { n: 'nope', id: 'x' }, 'NOT_FOUND'],
    ['a provider id with a NUL', LAUNCHED, { n: 'manual-p-1', id: 'i-\u0000' }, 'INVALID_INPUT'],
    ['a stopped instance', LAUNCHED, { n: 'manual-p-2', id: 'i-1' }, 'INVALID_STATE'],
    ['an error with a NUL', STOPPED, { n: 'manual-p-1', e: 'bad\u0000' }, 'INVALID_INPUT'],
  ])('refuses %s', async (_label, mutation, variables, code) => {
    const data = await ok(t, mutation, variables);
    expect((Object.values(data)[0] as { code: string }).code).toBe(code);
  });

  it('are for admins only', async () => {
    const user = await createUser(t, 'instances-user');
    for (const [m, v] of [
      [CREATE, { p: 'manual-p' }],
      [LAUNCHED, { n: 'manual-p-1', id: 'x' }],
      [STOPPED, { n: 'manual-p-1' }],
    ] as const) {
      expect((Object.values(await ok(t, m, v, user))[0] as { code: string }).code).toBe('FORBIDDEN');
      expect((Object.values(await ok(t, m, v, null))[0] as { code: string }).code).toBe('UNAUTHENTICATED');
    }
  });
});
