/**
 * The host of a host-bound pool (local, qemu): given at create or update, else the host of the
 * process that creates it; a cloud pool has none, and a host given for one is refused with nothing
 * written; a pool changes host only once its instances stopped.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createUser, ERROR_FIELDS, expectResult, ok, snapshot } from '../helpers/fixtures.js';

const EXEC_COMMAND = '/usr/local/bin/cloud-provider';
const t = useTestApp({ server: { hostName: 'build-1' }, providers: { execCommands: [EXEC_COMMAND] } });

const MUTATION = (field: 'createWorkerPool' | 'updateWorkerPool') =>
  `mutation($i: WorkerPoolInput!) { ${field}(input: $i) { __typename ... on WorkerPool { name providerType host }
    ${ERROR_FIELDS} ... on InputError { problems { path message } } } }`;
const create = (i: Record<string, unknown>, token?: string) => ok(t, MUTATION('createWorkerPool'), { i }, token);
const update = (i: Record<string, unknown>) => ok(t, MUTATION('updateWorkerPool'), { i });
const exec = { providerType: 'exec', specifications: { command: [EXEC_COMMAND] } };

const hostOf = async (name: string) =>
  (await t.sql<{ host: string | null }>('select host from worker_pool where name = ?', [name]))[0]?.host;

describe('the host of a pool', () => {
  it('a local pool runs on the host of the process that creates it, or on the one given', async () => {
    expect((await create({ name: 'here', providerType: 'local' })).createWorkerPool).toEqual({
      __typename: 'WorkerPool',
      name: 'here',
      providerType: 'local',
      host: 'build-1',
    });
    expect((await create({ name: 'there', providerType: 'local', host: 'build-2' })).createWorkerPool.host).toBe(
      'build-2',
    );
    expect(await hostOf('there')).toBe('build-2');
    const read = await ok(t, `{ workerPool(name: "there") { host } }`);
    expect(read.workerPool.host).toBe('build-2');
  });

  it('a cloud pool has none; a host given for one is refused, nothing written', async () => {
    expect((await create({ name: 'cloud', ...exec })).createWorkerPool.host).toBeNull();
    expect(await hostOf('cloud')).toBeNull();
    const before = await snapshot(t, ['worker_pool']);
    const r = (await create({ name: 'cloud-on-a-host', ...exec, host: 'build-1' })).createWorkerPool;
    expect(r).toMatchObject({ __typename: 'InputError', code: 'INVALID_INPUT', path: 'input.host' });
    expect(r.message).toBe(
      'input.host: exec pools run on any host; only pools of a host-bound provider (local, qemu) have one',
    );
    const u = (await update({ name: 'cloud', host: 'build-1' })).updateWorkerPool;
    expect(u).toMatchObject({ __typename: 'InputError', path: 'input.host' });
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
  });

  it('refuses a host that is not a host name, with the pool’s other problems', async () => {
    const before = await snapshot(t, ['worker_pool']);
    const r = (await create({ name: 'spaced', providerType: 'local', host: 'build 1', maxActiveInstances: -1 }))
      .createWorkerPool;
    expect(r.__typename).toBe('InputError');
    expect(r.problems.map((p: { path: string }) => p.path).sort()).toEqual(['input.host', 'input.maxActiveInstances']);
    expect(r.problems.find((p: { path: string }) => p.path === 'input.host').message).toMatch(
      /^input\.host: must be 1 to 100 printable ASCII characters without spaces/,
    );
    const long = (await create({ name: 'long', providerType: 'local', host: 'h'.repeat(101) })).createWorkerPool;
    expect(long).toMatchObject({ __typename: 'InputError', path: 'input.host' });
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
  });

  it('an update keeps the host unless given one; a change of provider gives or takes it', async () => {
    expect((await update({ name: 'there', maxActiveInstances: 3 })).updateWorkerPool.host).toBe('build-2');
    expect((await update({ name: 'there', host: null })).updateWorkerPool.host).toBe('build-2');
    expect((await update({ name: 'there', host: 'build-3' })).updateWorkerPool.host).toBe('build-3');
    // To a cloud provider: it runs anywhere; back to local: on this process's host, or the one given.
    expect((await update({ name: 'there', ...exec })).updateWorkerPool).toMatchObject({
      providerType: 'exec',
      host: null,
    });
    expect((await update({ name: 'there', providerType: 'local' })).updateWorkerPool.host).toBe('build-1');
    expect((await update({ name: 'cloud', providerType: 'local', host: 'build-4' })).updateWorkerPool.host).toBe(
      'build-4',
    );
    // A local pool made before pools kept their host keeps running anywhere.
    await t.sql(`update worker_pool set host = null where name = 'here'`);
    expect((await update({ name: 'here', maxActiveInstances: 2 })).updateWorkerPool.host).toBeNull();
  });

  it('a pool with live instances keeps its host', async () => {
    const [{ id }] = await t.sql<{ id: number }>(`select id from worker_pool where name = 'there'`);
    await t.sql(
      `insert into instance (name, pool_id, state, requested_at) values ('there-1', ?, 'RUNNING', now()), ('there-2', ?, 'TERMINATED', now())`,
      [id, id],
    );
    const before = await snapshot(t, ['worker_pool']);
    const r = (await update({ name: 'there', host: 'build-5' })).updateWorkerPool;
    expect(r).toMatchObject({ __typename: 'InputError', path: 'input.host' });
    expect(r.message).toBe(
      'input.host: the pool has 1 live instance on host build-1: let it stop first (maxActiveInstances 0, or enabled false)',
    );
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
    // Its own host again, and other changes, are fine.
    expect((await update({ name: 'there', host: 'build-1', maxActiveInstances: 4 })).updateWorkerPool.host).toBe(
      'build-1',
    );
    await t.sql(`update instance set state = 'TERMINATED' where name = 'there-1'`);
    expect((await update({ name: 'there', host: 'build-5' })).updateWorkerPool.host).toBe('build-5');
  });

  it('only an admin gives a pool a host', async () => {
    const user = await createUser(t, 'host-user');
    const before = await snapshot(t, ['worker_pool']);
    const r = (await create({ name: 'not-mine', providerType: 'local', host: 'build-1' }, user)).createWorkerPool;
    expect(r.__typename).toBe('ForbiddenError');
    expect(await snapshot(t, ['worker_pool'])).toEqual(before);
    await expectResult(t, 'WorkerPool', MUTATION('updateWorkerPool'), { i: { name: 'here', host: 'build-1' } });
  });
});
