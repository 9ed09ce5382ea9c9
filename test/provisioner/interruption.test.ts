/**
 * A spot interruption, on real processes (issue: spot instances and interruptions): a pool worker's
 * real agent watches the instance metadata (a stand-in of EC2's IMDSv2) and, when the notice comes
 * while it runs work, tells the server: its work goes back to the queue without counting a retry, the
 * worker is terminated, the agent stops its handler and exits 3, and the pool launches a replacement
 * (a local instance here) that runs the work, once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN, expectExactlyOnce, settled, until, useFleet } from '../faults/harness.js';
import { killLocalAgentsAfterEach, poolHandler, poolInstances, PROVISIONER_ENV } from './local-fleet.js';
import { startMetadataStandIn, type MetadataStandIn } from './stand-ins/ec2-metadata.js';

const f = useFleet();
killLocalAgentsAfterEach(f);
let imds: MetadataStandIn;
beforeAll(async () => {
  imds = await startMetadataStandIn();
});
afterAll(() => imds.close());

describe('a spot interruption', () => {
  it('re-queues the running work without a retry, ends the worker and its agent, and a replacement runs the work once', async () => {
    const server = await f.server(PROVISIONER_ENV, 'spot');
    const { handlers } = poolHandler(f, 'noop', '0.2');
    const created = await f.gql(
      server.url,
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on Error { code message } } }`,
      {
        i: {
          name: 'spotty',
          providerType: 'local',
          maxActiveInstances: 1,
          specifications: { enableTasks: ['noop'], handlers },
        },
      },
      ADMIN,
    );
    expect(created.data?.createWorkerPool.__typename, JSON.stringify(created)).toBe('WorkerPool');
    // The pool's one worker for now: a real agent on a "spot machine" (its handler sleeps long), watching the metadata.
    const spot = await f.agent({
      name: 'spot-1',
      url: server.url,
      sleep: '600',
      registration: { pool: 'spotty' },
      env: { TAGSCHED_INTERRUPTION_NOTICE: 'ec2', TAGSCHED_METADATA_URL: imds.url, TAGSCHED_INTERRUPTION_POLL: '0.2' },
    });
    const id = await f.createNoop(server.url);
    await until('the work to run on the spot worker', () =>
      f.executions().some((e) => e.id === id && e.agent === 'spot-1'),
    );
    expect(await poolInstances(f, 'spotty')).toEqual([]); // the pool is at its one instance: spot-1

    imds.interrupt({ action: 'terminate', time: new Date(Date.now() + 120_000).toISOString() });
    expect(await spot.exited).toBe(3);
    // Back in the queue at once, with why, and no retry counted (the replacement needs seconds to start).
    const [back] = await f.sql<{ retry_count: number; status_reason: string | null }>(
      `select retry_count, status_reason from work_request where id = $1`,
      [Number(id)],
    );
    expect(back.retry_count).toBe(0);
    expect(back.status_reason).toMatch(
      /^worker spot-1 was terminated \(its instance is being interrupted by its provider \(terminate at .*\)\); re-queued, not counted as a retry$/,
    );

    const [s] = await settled(f, [id], 240_000);
    expect(s).toMatchObject({ status: 'COMPLETED', retryCount: 0 });
    expect(s.worker).not.toBe('spot-1');
    expectExactlyOnce(f, [s], { killed: ['spot-1'] });
    const [replacement] = await poolInstances(f, 'spotty');
    expect(replacement.name).toBe(s.worker);
    const [worker] = await f.sql<{ terminated: boolean }>(
      `select terminated_at is not null as terminated from worker where name = 'spot-1'`,
    );
    expect(worker.terminated).toBe(true);
    expect(spot.logged('the provider is taking this machine away: its work goes back to the queue')).toHaveLength(1);
  }, 300_000);
});
