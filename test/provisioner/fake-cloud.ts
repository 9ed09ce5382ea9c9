/**
 * A stand-in cloud for the provisioner's tests, registered through the provider registry: it keeps
 * its instances in memory, records every call (with the account it was given), and can be told to
 * fail launches (a ProviderError of any kind), to hang (a timeout), to lose an instance, to end one
 * by itself (listed as gone, at a time of its own clock), or to hold one tagsched never launched. It starts no machine: a test plays the agent with the activation
 * token of the LaunchSpec it recorded.
 */
import { registerProvider } from '../../src/providers/registry.js';
import type { TestApp } from '../helpers/app.js';
import { ERROR_FIELDS, expectResult, reportMetadata } from '../helpers/fixtures.js';
import {
  ProviderError,
  type LaunchSpec,
  type Provider,
  type ProviderErrorKind,
  type ProviderInstance,
} from '../../src/providers/provider.js';

export interface FakeCloud {
  readonly type: string;
  /** Launches asked for, in order, with the account each call carried. */
  readonly launches: { spec: LaunchSpec; account: unknown }[];
  readonly terminated: string[];
  listCalls: number;
  /** What the next launches do: answer, fail with a ProviderError, or never answer. */
  behaviour: { kind: 'ok' } | { kind: 'fail'; error: ProviderErrorKind; message: string } | { kind: 'hang' };
  /** Instances as the cloud has them, by id. */
  readonly instances: Map<string, ProviderInstance & { pool: string }>;
  /** Puts an instance in the cloud that tagsched knows nothing of. */
  plant(pool: string, id: string, name: string | null): void;
  /** Removes an instance as if the cloud lost it. */
  lose(id: string): void;
  /** Marks an instance as ended by itself (listed as `gone`), at `endedAt` by the cloud's clock. */
  end(id: string, endedAt: Date): void;
  /** Forgets everything, for the next test (the provisioner keeps this provider object). */
  reset(): void;
  unregister(): void;
}

/** Registers a fake cloud under `type` and returns its controls. */
export function registerFakeCloud(type: string): FakeCloud {
  let next = 1;
  const cloud = {
    type,
    launches: [] as FakeCloud['launches'],
    terminated: [] as string[],
    listCalls: 0,
    behaviour: { kind: 'ok' } as FakeCloud['behaviour'],
    instances: new Map<string, ProviderInstance & { pool: string }>(),
    plant(pool: string, id: string, name: string | null) {
      cloud.instances.set(id, { id, name, pool, state: 'running', createdAt: new Date() });
    },
    lose(id: string) {
      cloud.instances.delete(id);
    },
    end(id: string, endedAt: Date) {
      const i = cloud.instances.get(id);
      if (i) cloud.instances.set(id, { ...i, state: 'gone', endedAt });
    },
    reset() {
      next = 1;
      cloud.launches.length = 0;
      cloud.terminated.length = 0;
      cloud.listCalls = 0;
      cloud.behaviour = { kind: 'ok' };
      cloud.instances.clear();
    },
    unregister: (): void => undefined,
  };
  const provider: Provider = {
    async launch(spec, call) {
      cloud.launches.push({ spec, account: call.account });
      const b = cloud.behaviour;
      if (b.kind === 'fail') throw new ProviderError(b.error, b.message, `Fake${b.error}`);
      if (b.kind === 'hang') return new Promise<never>(() => undefined);
      const id = `fake-${next++}`;
      cloud.instances.set(id, { id, name: spec.name, pool: spec.pool, state: 'running', createdAt: new Date() });
      return { id };
    },
    async terminate(id) {
      cloud.terminated.push(id);
      cloud.instances.delete(id);
    },
    async list(pool) {
      cloud.listCalls++;
      return [...cloud.instances.values()].filter((i) => i.pool === pool).map(({ pool: _p, ...i }) => i);
    },
  };
  cloud.unregister = registerProvider(type, () => provider);
  return cloud;
}

/** Plays the agent of the cloud's launch `index`: trades its activation token, then reports a noop-running amd64 machine (connects). Returns its worker token. */
export async function bootLaunched(t: TestApp, cloud: FakeCloud, index: number): Promise<string> {
  const { spec } = cloud.launches[index];
  const r = await expectResult(
    t,
    'WorkerTokenPayload',
    `mutation($n: String) { activateWorker(input: { name: $n }) { __typename ... on WorkerTokenPayload { token } ${ERROR_FIELDS} } }`,
    { n: spec.agent.workerName },
    spec.agent.activationToken,
  );
  await reportMetadata(t, r.token, { architectures: ['amd64'], tasks: [{ type: 'worker', name: 'noop', version: 1 }] });
  return r.token as string;
}
