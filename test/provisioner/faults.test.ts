/**
 * Pools under faults, on real processes: an agent SIGKILLed in the middle of a run on a pool
 * instance, a server killed between its provider's launch and the instance record, and a provider
 * that loses an instance whose agent still runs. Each time the work runs exactly once, and the pool
 * gets the instance it needs.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive, expectExactlyOnce, settled, until, useFleet, type Server } from '../faults/harness.js';
import {
  killLocalAgentsAfterEach,
  localAgentPids,
  poolHandler,
  poolInstances,
  PROVISIONER_ENV,
  runLeft,
} from './local-fleet.js';

const f = useFleet();
killLocalAgentsAfterEach(f);

const PRELOAD = ['test/provisioner/process-providers.ts'];

async function createPool(server: Server, name: string, providerType: string, handlers: unknown): Promise<void> {
  const r = await f.gql(
    server.url,
    `mutation($i: WorkerPoolInput!) { createWorkerPool(input: $i) { __typename ... on Error { code message } } }`,
    {
      i: { name, providerType, maxActiveInstances: 1, idleTimeoutSeconds: 2, specifications: { handlers } },
    },
  );
  expect(r.data?.createWorkerPool.__typename, JSON.stringify(r)).toBe('WorkerPool');
}

/** Waits until the pool's agents have started `n` executions, and returns them. */
const started = (n = 1) =>
  until(`${n} execution(s) started`, () => {
    const runs = f.executions();
    return runs.length >= n && runs;
  });

describe.sequential('pools under faults', () => {
  it('an agent SIGKILLed mid-run: its instance is found gone, its work re-queued, and a new instance runs it', async () => {
    const server = await f.server(PROVISIONER_ENV);
    const { handlers, sleepFile } = poolHandler(f, 'noop', '600');
    await createPool(server, 'kill', 'local', handlers);
    const id = await f.createNoop(server.url);
    const [run] = await started();
    const [agent] = localAgentPids(f);
    expect(agent.name).toBe(run.agent);
    fs.writeFileSync(sleepFile, '0.2'); // the next run is quick
    process.kill(agent.pid, 'SIGKILL');
    await until('the killed agent’s handler to be gone', () => !runLeft(run));

    const [s] = await settled(f, [id], 120_000);
    expectExactlyOnce(f, [s], { killed: [run.agent] });
    expect(s.worker).not.toBe(run.agent);
    expect(s.retryCount).toBe(1);
    expect(s.statusReason).toBe(
      `worker ${run.agent} was terminated (its instance ended by itself); re-queued (retry 1 of 3)`,
    );
    const [first, second] = await poolInstances(f, 'kill');
    expect(first).toMatchObject({ name: run.agent, state: 'TERMINATED', error: 'its instance ended by itself' });
    expect(second.name).toBe(s.worker);
    expect(['RUNNING', 'STOPPING', 'TERMINATED']).toContain(second.state);
  }, 240_000);

  it('a server killed between the provider’s launch and the instance record: the next server finds the instance by its name', async () => {
    const { handlers } = poolHandler(f, 'noop', '0.2');
    const crashing = await f.server({ ...PROVISIONER_ENV, FAULT_CRASH_AFTER_LAUNCH: '1' }, 'crashing', PRELOAD);
    await createPool(crashing, 'crash', 'local-crash', handlers);
    const id = await f.createNoop(crashing.url);
    await until(
      'the server to kill itself after the launch',
      () => crashing.child.exitCode !== null || crashing.child.signalCode !== null,
    );
    const [instance] = await poolInstances(f, 'crash');
    expect(instance).toMatchObject({ state: 'LAUNCHING', provider_id: null });
    expect(
      localAgentPids(f)
        .filter((a) => a.name.startsWith('crash-'))
        .map((a) => a.name),
    ).toEqual([instance.name]); // the pool's own (an earlier test's may be left)

    // A server on the same port (the agent was told that URL), without the crash.
    const next = await f.server({ ...PROVISIONER_ENV, PORT: String(crashing.port) }, 'next', PRELOAD);
    const [s] = await settled(f, [id], 120_000);
    expectExactlyOnce(f, [s]);
    expect(s.worker).toBe(instance.name);
    // The dead server's provisioner lease expires first (TAGSCHED_LEADER_LEASE_SECONDS, 15 s): then the next
    // server leads, and its first cycle reconciles.
    await until('the next server to lead and reconcile the pool', () =>
      next.logs.some((l) => l.msg === 'found the instance of an interrupted launch'),
    );
    const instances = await poolInstances(f, 'crash');
    expect(instances).toHaveLength(1); // launched once, never again
    expect(instances[0].provider_id).toBe(instance.name);
    expect(
      next.logs.filter((l) => l.msg === 'found the instance of an interrupted launch').map((l) => l.instance),
    ).toEqual([instance.name]);
  }, 240_000);

  it('a provider that lost an instance whose agent still runs: the worker is terminated, its agent refused, its work re-queued and run once elsewhere', async () => {
    const forget = path.join(f.dir, 'forget');
    fs.writeFileSync(forget, '');
    const server = await f.server({ ...PROVISIONER_ENV, FAULT_FORGET_FILE: forget }, 'forgetful', PRELOAD);
    const { handlers, sleepFile } = poolHandler(f, 'noop', '600');
    await createPool(server, 'lost', 'local-forgetful', handlers);
    const before = f.executions().length;
    const id = await f.createNoop(server.url);
    const [run] = await until('the execution to start', () => {
      const runs = f.executions().slice(before);
      return runs.length > 0 && runs;
    });
    const agent = localAgentPids(f).find((a) => a.name === run.agent)!;
    fs.writeFileSync(sleepFile, '0.2');
    fs.writeFileSync(forget, `${agent.name}\n`);

    // Its handler is stopped with it: the work cannot finish twice.
    await until('the lost agent to exit', () => !alive(agent.pid), 120_000);
    await until('its handler to be gone', () => !runLeft(run));
    const [s] = await settled(f, [id], 120_000);
    expectExactlyOnce(f, [s], { killed: [agent.name] });
    expect(s.worker).not.toBe(agent.name);
    const [lost] = await poolInstances(f, 'lost');
    expect(lost).toMatchObject({
      name: agent.name,
      state: 'TERMINATED',
      error: 'the provider no longer has its instance',
    });
    const [w] = await f.sql<{ terminated: boolean }>(
      `select terminated_at is not null as terminated from worker where name = $1`,
      [agent.name],
    );
    expect(w.terminated).toBe(true);
  }, 240_000);
});
