/**
 * The whole loop with the local provider, on real processes: two server processes on one database
 * (both running the provisioner), a pool with no instance, 20 pending sbuilds. The provisioner
 * launches real agents up to maxActiveInstances, they activate and run everything, go idle, are
 * stopped after the idle timeout; every request ran exactly once, no instance was launched twice,
 * and the month's runtime is the sum of the instances'.
 */
import { describe, expect, it } from 'vitest';
import { ADMIN, alive, expectExactlyOnce, settled, until, useFleet } from '../faults/harness.js';
import {
  killLocalAgentsAfterEach,
  localAgentPids,
  poolHandler,
  poolInstances,
  PROVISIONER_ENV,
} from './local-fleet.js';

const f = useFleet();
killLocalAgentsAfterEach(f);

const MAX = 4;

describe('pools with the local provider, end to end', () => {
  it('launch agents up to the limit for pending work, run it all exactly once, and stop them when idle; two servers launch nothing twice', async () => {
    const [one, two] = await Promise.all([f.server(PROVISIONER_ENV, 'one'), f.server(PROVISIONER_ENV, 'two')]);
    const { handlers } = poolHandler(f, 'sbuild', '0.5');
    const created = await f.gql(
      one.url,
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on WorkerPool { templateProvidedTags { tag } } ... on Error { code message } } }`,
      {
        i: {
          name: 'farm',
          providerType: 'local',
          maxActiveInstances: MAX,
          idleTimeoutSeconds: 2,
          // Everything an sbuild needs comes from the specifications: no tag is added by hand.
          specifications: { architectures: ['amd64'], enableBackends: ['unshare'], enableTasks: ['sbuild'], handlers },
        },
      },
    );
    expect(created.data?.createWorkerPool.__typename, JSON.stringify(created)).toBe('WorkerPool');

    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await f.gql(
        (i % 2 ? one : two).url,
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "sbuild", taskData: { source_package: "hello", host_architecture: "amd64" } }) { ... on WorkRequest { id } ... on Error { code message } } }`,
      );
      expect(r.data?.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
      ids.push(r.data!.createWorkRequest.id as string);
    }

    // The workers appear on the status page while they run.
    const page = () => fetch(`${one.url.replace('/graphql', '')}/-/status/workers/`).then((r) => r.text());
    const shown = await until(
      'a pool worker on /-/status/workers/',
      async () => /farm-[0-9a-f]{8}/.exec(await page())?.[0],
    );
    // Its own page shows its pool, but not the command its handler runs on this machine.
    const own = await fetch(`${one.url.replace('/graphql', '')}/-/status/workers/${shown}/`).then((r) => r.text());
    expect(own).toContain('Pool farm');
    expect(own).toContain('worker:cap:sbuild');
    expect(own).not.toContain('pool-handler.sh');

    const final = await settled(f, ids, 120_000);
    expect(expectExactlyOnce(f, final)).toEqual({ completed: 20, aborted: 0 });
    const workers = new Set(final.map((s) => s.worker));
    expect(workers.size).toBeLessThanOrEqual(MAX);

    // Idle, they are stopped; their processes end and their instances are TERMINATED.
    await until(
      'every instance to be TERMINATED',
      async () => (await poolInstances(f, 'farm')).every((i) => i.state === 'TERMINATED'),
      120_000,
    );
    const instances = await poolInstances(f, 'farm');
    expect(instances).toHaveLength(MAX);
    expect(instances.map((i) => i.name).sort()).toEqual([...workers].sort());
    for (const i of instances) {
      expect(i).toMatchObject({ state: 'TERMINATED', error: null, provider_id: i.name });
      expect(i.started_at).not.toBeNull();
    }
    // Never more than MAX at once.
    const events = instances.flatMap((i) => [
      { t: new Date(i.requested_at).getTime(), d: 1 },
      { t: new Date(i.terminated_at!).getTime(), d: -1 },
    ]);
    let live = 0;
    let most = 0;
    for (const e of events.sort((a, b) => a.t - b.t || a.d - b.d)) most = Math.max(most, (live += e.d));
    expect(most).toBeLessThanOrEqual(MAX);
    // Each instance was started once, by one of the two servers.
    const started = [...one.logs, ...two.logs]
      .filter((l) => l.msg === 'local agent started')
      .map((l) => l.instance as string);
    expect(started.sort()).toEqual(instances.map((i) => i.name).sort());
    await until('the agents’ processes to end', () => localAgentPids(f).every((a) => !alive(a.pid)));

    // Gone from the workers list and the status page, kept as history.
    const list = await f.gql(
      one.url,
      `{ workers(filter: { pool: "farm" }) { edges { node { name } } } all: workers(filter: { pool: "farm", includeInactive: true }) { edges { node { status } } } }`,
      {},
      ADMIN,
    );
    expect(list.data!.workers.edges).toEqual([]);
    expect(list.data!.all.edges.map((e: { node: { status: string } }) => e.node.status)).toEqual(
      Array(MAX).fill('INACTIVE'),
    );
    expect(await page()).not.toMatch(/farm-[0-9a-f]{8}/);

    // The month's runtime adds up.
    const pool = await f.gql(
      one.url,
      `{ workerPool(name: "farm") { monthRuntimeSeconds instances { edges { node { runtimeSeconds } } } } }`,
    );
    const runtimes = pool.data!.workerPool.instances.edges.map(
      (e: { node: { runtimeSeconds: number } }) => e.node.runtimeSeconds,
    );
    expect(runtimes.every((s: number) => s > 0)).toBe(true);
    expect(pool.data!.workerPool.monthRuntimeSeconds).toBeCloseTo(
      runtimes.reduce((a: number, b: number) => a + b, 0),
      2,
    );
    for (const [i, s] of instances.map((x, k) => [x, runtimes[runtimes.length - 1 - k]] as const))
      expect(s).toBeCloseTo(i.runtime, 2);
  }, 300_000);
});
