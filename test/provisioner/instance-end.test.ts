/**
 * An instance's end is recorded when its process ends, not at the next periodic cycle: a local
 * agent stopped by a scale-in (here terminateWorker) exits, the provider says so at once, and its
 * instance is TERMINATED at the exit's time, with its runtime ending there. The periodic cycle is an
 * hour here, so only the provider's word can end it within the test. Real server process, real agent.
 */
import { describe, expect, it } from 'vitest';
import { ADMIN, alive, until, useFleet } from '../faults/harness.js';
import {
  killLocalAgentsAfterEach,
  localAgentPids,
  poolHandler,
  poolInstances,
  PROVISIONER_ENV,
} from './local-fleet.js';

const f = useFleet();
killLocalAgentsAfterEach(f);

describe('the end of a local instance', () => {
  it('is recorded when its agent exits, and its runtime stops there', async () => {
    const server = await f.server({ ...PROVISIONER_ENV, TAGSCHED_PROVISIONER_INTERVAL_SECONDS: '3600' }, 'end');
    const { handlers } = poolHandler(f, 'noop', '0');
    const created = await f.gql(
      server.url,
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on Error { code message } } }`,
      {
        i: {
          name: 'ends',
          providerType: 'local',
          minIdleInstances: 1,
          maxActiveInstances: 1,
          specifications: { enableTasks: ['noop'], handlers },
        },
      },
      ADMIN,
    );
    expect(created.data?.createWorkerPool.__typename, JSON.stringify(created)).toBe('WorkerPool');
    const [running] = await until('the instance to run', async () => {
      const rows = await poolInstances(f, 'ends');
      return rows.length === 1 && rows[0].state === 'RUNNING' ? rows : null;
    });

    const stopped = await f.gql(
      server.url,
      `mutation($n: String!) { terminateWorker(input: { name: $n }) { __typename ... on Error { code message } } }`,
      { n: running.name },
      ADMIN,
    );
    expect(stopped.data?.terminateWorker.__typename, JSON.stringify(stopped)).toBe('Worker');
    const [agent] = localAgentPids(f).filter((a) => a.name === running.name);
    await until('the agent to exit', () => !alive(agent.pid), 60_000, 50);
    const exitSeen = Date.now();

    const [ended] = await until(
      'the instance to be TERMINATED',
      async () => {
        const rows = await poolInstances(f, 'ends');
        return rows[0].state === 'TERMINATED' ? rows : null;
      },
      30_000,
      100,
    );
    // Recorded at the exit (seen here within the polling interval), not at the time of the cycle that noticed.
    const terminatedAt = new Date(ended.terminated_at!).getTime();
    expect(terminatedAt).toBeLessThanOrEqual(exitSeen + 100);
    expect(terminatedAt).toBeGreaterThan(exitSeen - 5_000);
    expect(ended.runtime).toBeCloseTo((terminatedAt - new Date(ended.requested_at).getTime()) / 1000, 2);
    expect(server.logs.filter((l) => l.msg === 'local agent exited')).toHaveLength(1);
  }, 180_000);
});
