/**
 * Instances that retire (src/scheduler/rules/instance-retirement.ts), on real processes: a local pool
 * with `maxWorkRequestsPerInstance: 1` runs five requests on five instances, each stopped once its
 * one request is done, every request exactly once. Real server process, real agents over WebSockets.
 */
import { describe, expect, it } from 'vitest';
import { ADMIN, expectExactlyOnce, settled, until, useFleet } from '../faults/harness.js';
import { killLocalAgentsAfterEach, poolHandler, poolInstances, PROVISIONER_ENV } from './local-fleet.js';

const f = useFleet();
killLocalAgentsAfterEach(f);

describe('retiring instances', () => {
  it('maxWorkRequestsPerInstance 1: five requests on five instances, each stopped after its one', async () => {
    const server = await f.server(PROVISIONER_ENV, 'fresh');
    const { handlers } = poolHandler(f, 'noop', '0.5');
    const created = await f.gql(
      server.url,
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on WorkerPool { maxWorkRequestsPerInstance } ... on Error { code message } } }`,
      {
        i: {
          name: 'fresh',
          providerType: 'local',
          maxActiveInstances: 2,
          maxWorkRequestsPerInstance: 1,
          specifications: { enableTasks: ['noop'], handlers },
        },
      },
      ADMIN,
    );
    expect(created.data?.createWorkerPool, JSON.stringify(created)).toEqual({
      __typename: 'WorkerPool',
      maxWorkRequestsPerInstance: 1,
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await f.createNoop(server.url));

    const states = await settled(f, ids, 300_000);
    expect(states.map((s) => s.status)).toEqual(Array(5).fill('COMPLETED'));
    expectExactlyOnce(f, states);
    // Each on its own instance: five workers, none ran two.
    const workers = states.map((s) => s.worker);
    expect(new Set(workers).size).toBe(5);
    const ran = await f.sql<{ name: string; assigned_total: number; retiring_reason: string | null }>(
      `select name, assigned_total, retiring_reason from worker where name = any($1::text[]) order by name`,
      [workers],
    );
    expect(ran.map((w) => [w.assigned_total, w.retiring_reason])).toEqual(Array(5).fill([1, 'WORK_REQUESTS']));
    // Each instance that ran its one request is stopped by a cycle, with its reason.
    await until('the five instances that ran to be stopped', async () => {
      const instances = (await poolInstances(f, 'fresh')).filter((x) => workers.includes(x.name));
      return instances.length === 5 && instances.every((i) => i.state === 'STOPPING' || i.state === 'TERMINATED');
    });
    const stops = server.logs.filter(
      (l) => l.msg === 'stopping an idle instance' && String(l.why).startsWith('retired:'),
    );
    expect(stops.map((l) => l.worker).sort()).toEqual([...workers].sort());
    expect(stops[0].why).toBe('retired: it ran the 1 work request pool fresh gives an instance');
  }, 360_000);
});
