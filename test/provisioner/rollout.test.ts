/**
 * A rollout (src/scheduler/rules/instance-retirement.ts, outdated instances) on real processes: a
 * local pool of three whose specifications change is replaced one instance at a time, only idle
 * ones retire, and the work submitted meanwhile runs exactly once. Real server, real agents.
 */
import { describe, expect, it } from 'vitest';
import { ADMIN, expectExactlyOnce, settled, until, useFleet } from '../faults/harness.js';
import { killLocalAgentsAfterEach, poolHandler, PROVISIONER_ENV } from './local-fleet.js';

const f = useFleet();
killLocalAgentsAfterEach(f);

interface Node {
  name: string;
  state: string;
  outdated: boolean | null;
  worker: { retiringReason: string | null } | null;
}

describe('a rollout', () => {
  it('replaces a pool of three one at a time when its specifications change, with no work lost', async () => {
    const server = await f.server(PROVISIONER_ENV, 'roll');
    const { handlers } = poolHandler(f, 'noop', '2');
    const pool = (i: Record<string, unknown>) =>
      f.gql(
        server.url,
        `mutation($i: WorkerPoolInput!) { updateWorkerPool(input: $i) { __typename ... on Error { code message } } }`,
        { i },
        ADMIN,
      );
    const created = await f.gql(
      server.url,
      `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on Error { code message } } }`,
      {
        i: {
          name: 'roll',
          providerType: 'local',
          minIdleInstances: 3,
          maxActiveInstances: 3,
          specifications: { enableTasks: ['noop'], handlers },
        },
      },
      ADMIN,
    );
    expect(created.data?.createWorkerPool.__typename, JSON.stringify(created)).toBe('WorkerPool');
    const instances = async (): Promise<Node[]> => {
      const r = await f.gql(
        server.url,
        `{ workerPool(name: "roll") { instances(first: 100) { edges { node { name state outdated worker { retiringReason } } } } } }`,
        {},
        ADMIN,
      );
      return (r.data?.workerPool.instances.edges as { node: Node }[]).map((e) => e.node);
    };
    const first = await until('three instances running', async () => {
      const all = await instances();
      return all.filter((i) => i.state === 'RUNNING').length === 3 && all;
    });
    expect(first.every((i) => i.outdated === false)).toBe(true);

    // Work in flight while the rollout runs; then new specifications (the handler's command changes).
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await f.createNoop(server.url));
    const changed = await pool({
      name: 'roll',
      specifications: {
        enableTasks: ['noop'],
        handlers: handlers.map((h) => ({ ...h, command: `ROLLOUT=2 ${h.command}` })),
      },
    });
    expect(changed.data?.updateWorkerPool.__typename, JSON.stringify(changed)).toBe('WorkerPool');

    // Until every live instance is new: never more than one taken away at a time (at least two old or new serving).
    let lowest = 3;
    let retiringAtOnce = 0;
    const done = await until(
      'every live instance on the new specifications',
      async () => {
        const all = await instances();
        const live = all.filter((i) => i.state === 'RUNNING');
        const serving = live.filter((i) => !i.worker?.retiringReason);
        lowest = Math.min(lowest, serving.length);
        retiringAtOnce = Math.max(retiringAtOnce, live.filter((i) => i.worker?.retiringReason === 'OUTDATED').length);
        return live.length === 3 && live.every((i) => i.outdated === false) && all;
      },
      300_000,
      100,
    );
    expect(retiringAtOnce).toBeLessThanOrEqual(1);
    expect(lowest).toBeGreaterThanOrEqual(2);
    const firstNames = new Set(first.map((i) => i.name));
    expect(done.filter((i) => i.state === 'RUNNING').every((i) => !firstNames.has(i.name))).toBe(true);

    const states = await settled(f, ids, 300_000);
    expect(states.map((s) => s.status)).toEqual(Array(4).fill('COMPLETED'));
    expectExactlyOnce(f, states);
    const outdated = server.logs.filter((l) => l.msg === 'an idle instance is outdated: it is replaced');
    expect(outdated.map((l) => l.worker).sort()).toEqual([...firstNames].sort());
  }, 420_000);
});
