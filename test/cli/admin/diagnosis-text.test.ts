/** The diagnosis in words (`work why`), table-driven over the states and their edge cases. */
import { describe, expect, it } from 'vitest';
import { explain, type DiagnosisData, type WhyData } from '../../../src/cli/admin/diagnosis-text.js';

const NONE: DiagnosisData = {
  state: 'NOT_PENDING',
  matchingWorkers: 0,
  availableWorkers: 0,
  busyWorkers: 0,
  unavailableWorkers: [],
  matchingPools: [],
  mismatches: [],
};
const pending = (diagnosis: Partial<DiagnosisData>, extra: Partial<WhyData> = {}): WhyData => ({
  id: '7',
  status: 'PENDING',
  result: null,
  statusReason: null,
  dependsOn: [],
  hiddenDependencyCount: 0,
  worker: null,
  ...extra,
  diagnosis: { ...NONE, ...diagnosis },
});
const counted = (missingOnWorker: string[], missingOnTask: string[]) => ({
  missingOnWorker,
  missingOnTask,
  missingOnWorkerCount: missingOnWorker.length,
  missingOnTaskCount: missingOnTask.length,
});
const group = (
  names: string[],
  missingOnWorker: string[],
  missingOnTask: string[] = [],
  workerCount = names.length,
) => ({
  pool: null,
  workerCount,
  workerNames: names,
  ...counted(missingOnWorker, missingOnTask),
});
const pool = (name: string, missingOnWorker: string[], missingOnTask: string[] = []) => ({
  pool: name,
  workerCount: 0,
  workerNames: [],
  ...counted(missingOnWorker, missingOnTask),
});
/** A group whose tags the caller may not see: the API gives the counts only. */
const hiddenGroup = (names: string[], onWorker: number, onTask: number) => ({
  pool: null,
  workerCount: names.length,
  workerNames: names,
  missingOnWorker: null,
  missingOnTask: null,
  missingOnWorkerCount: onWorker,
  missingOnTaskCount: onTask,
});

describe('explain', () => {
  it.each([
    [
      'ready, one worker',
      pending({ state: 'READY', availableWorkers: 1, matchingWorkers: 1 }),
      'ready: 1 matching worker has a free slot; the next scheduling pass assigns it',
    ],
    [
      'ready, several',
      pending({ state: 'READY', availableWorkers: 3, matchingWorkers: 4 }),
      'ready: 3 matching workers have a free slot; the next scheduling pass assigns it',
    ],
    [
      'capacity, several busy',
      pending({ state: 'WAITING_FOR_CAPACITY', busyWorkers: 3, matchingWorkers: 3 }),
      'waiting for capacity: 3 matching workers are all busy',
    ],
    [
      'capacity, one busy',
      pending({ state: 'WAITING_FOR_CAPACITY', busyWorkers: 1, matchingWorkers: 1 }),
      'waiting for capacity: the one matching worker is busy',
    ],
    [
      'capacity, a pool could add more',
      pending({ state: 'WAITING_FOR_CAPACITY', busyWorkers: 2, matchingWorkers: 2, matchingPools: ['cloud'] }),
      'waiting for capacity: 2 matching workers are all busy; pool cloud could start one',
    ],
    [
      'capacity, the pool at its limit',
      pending({
        state: 'WAITING_FOR_CAPACITY',
        busyWorkers: 2,
        matchingWorkers: 2,
        matchingPools: ['demo'],
        pools: [
          { pool: 'demo', instances: 2, maxActiveInstances: 2, atLimit: ['MAX_ACTIVE_INSTANCES'], launching: [] },
        ],
      }),
      'waiting for capacity: 2 matching workers are all busy; pool demo is at its limit of 2 instances',
    ],
    [
      'capacity, one pool launching and at its limit, another out of budget and backing off',
      pending({
        state: 'WAITING_FOR_CAPACITY',
        busyWorkers: 1,
        matchingWorkers: 2,
        matchingPools: ['a', 'b'],
        pools: [
          {
            pool: 'a',
            instances: 2,
            maxActiveInstances: 2,
            atLimit: ['MAX_ACTIVE_INSTANCES'],
            launching: [{ name: 'a-2', since: '2026-11-26T10:00:00Z' }],
          },
          { pool: 'b', instances: 0, maxActiveInstances: 5, atLimit: ['MONTHLY_BUDGET', 'BACKOFF'], launching: [] },
        ],
      }),
      'waiting for capacity: the one matching worker is busy; pool a is launching a-2 (12 s) and at its limit of 2 instances; pool b is out of its monthly runtime budget and waiting after failed launches',
    ],
    [
      'workers: the only matching worker is an instance still launching',
      pending({
        state: 'WAITING_FOR_WORKERS',
        matchingWorkers: 1,
        unavailableWorkers: [{ reason: 'LAUNCHING', count: 1 }],
        matchingPools: ['demo'],
        pools: [
          {
            pool: 'demo',
            instances: 1,
            maxActiveInstances: 1,
            atLimit: ['MAX_ACTIVE_INSTANCES'],
            launching: [{ name: 'demo-3', since: '2026-11-26T10:00:00Z' }],
          },
        ],
      }),
      'waiting for workers: 1 worker matches but none is available (1 launching); pool demo is launching demo-3 (12 s) and at its limit of 1 instance',
    ],
    [
      'workers, none available',
      pending({
        state: 'WAITING_FOR_WORKERS',
        matchingWorkers: 3,
        unavailableWorkers: [
          { reason: 'DISCONNECTED', count: 2 },
          { reason: 'NOT_ASSIGNABLE', count: 1 },
        ],
      }),
      'waiting for workers: 3 workers match but none is available (2 disconnected, 1 not assignable)',
    ],
    [
      'provisioning',
      pending({ state: 'WAITING_FOR_PROVISIONING', matchingPools: ['cloud', 'big'] }),
      'waiting for provisioning: no worker matches; pools cloud, big could start one',
    ],
    [
      'provisioning, the pool launching with room for more',
      pending({
        state: 'WAITING_FOR_PROVISIONING',
        matchingPools: ['cloud'],
        pools: [
          {
            pool: 'cloud',
            instances: 1,
            maxActiveInstances: 4,
            atLimit: [],
            launching: [{ name: 'cloud-1', since: '2026-11-26T09:57:00Z' }],
          },
        ],
      }),
      'waiting for provisioning: no worker matches; pool cloud is launching cloud-1 (3 min)',
    ],
    [
      'held by pool limits',
      pending({
        state: 'WAITING_FOR_POOL_LIMIT',
        matchingPools: ['cloud'],
        pools: [
          { pool: 'cloud', instances: 0, maxActiveInstances: 0, atLimit: ['MAX_ACTIVE_INSTANCES'], launching: [] },
        ],
      }),
      'held by pool limits: no worker matches and no matching pool may start one now; pool cloud is at its limit of 0 instances',
    ],
    [
      'orchestrated, running',
      pending({ state: 'ORCHESTRATED' }, { status: 'RUNNING', worker: null }),
      'orchestrated by the server, never by a worker (a workflow runs through its children, a synchronization point completes when its dependencies have): running',
    ],
    [
      'orchestrated, blocked',
      pending({ state: 'ORCHESTRATED' }, { status: 'BLOCKED', dependsOn: ['5'] }),
      'orchestrated by the server, never by a worker (a workflow runs through its children, a synchronization point completes when its dependencies have): blocked: waiting for its dependencies to complete (5)',
    ],
    [
      'unschedulable, nobody at all',
      pending({ state: 'UNSCHEDULABLE' }),
      'unschedulable: there is no worker and no enabled pool',
    ],
    [
      'unschedulable, a tag nobody provides',
      pending({
        state: 'UNSCHEDULABLE',
        mismatches: [
          group(['arm-1', 'arm-2'], ['worker:cap:sbuild']),
          pool('cloud', ['worker:cap:sbuild', 'worker:build-arch:arm64']),
        ],
      }),
      'unschedulable: no worker or pool provides worker:cap:sbuild (nearest: workers arm-1, arm-2)',
    ],
    [
      'unschedulable, each lacks something else',
      pending({
        state: 'UNSCHEDULABLE',
        mismatches: [
          group(['secure-1'], [], ['task:workspace:debian:security']),
          group(['arm-1'], ['worker:build-arch:amd64']),
        ],
      }),
      'unschedulable: no worker or pool matches (nearest: worker secure-1, which requires task:workspace:debian:security, which the request does not provide)',
    ],
  ])('%s', (_name, input, summary) => {
    expect(explain(input, new Date('2026-11-26T10:00:12Z')).summary).toBe(summary);
  });

  it('lists each group that does not match, with a count when names were cut', () => {
    const { details } = explain(
      pending({
        state: 'WAITING_FOR_CAPACITY',
        busyWorkers: 1,
        matchingWorkers: 2,
        unavailableWorkers: [{ reason: 'DRAINING', count: 1 }],
        mismatches: [
          group(['a', 'b', 'c', 'd'], ['worker:class:large'], [], 12),
          pool('cloud', ['worker:build-arch:riscv64'], ['task:x']),
        ],
      }),
    );
    expect(details).toEqual([
      'matching but unavailable: 1 draining',
      'workers a, b, c, … (12 in all): lack worker:class:large',
      'pool cloud: lack worker:build-arch:riscv64; require task:x, which the request does not provide',
    ]);
  });

  it('says how many tags are missing where the caller may not see which (anonymous, another worker)', () => {
    const { summary, details } = explain(
      pending({
        state: 'UNSCHEDULABLE',
        mismatches: [hiddenGroup(['secure-1'], 0, 1), hiddenGroup(['arm-1', 'arm-2'], 2, 1)],
      }),
    );
    expect(summary).toBe(
      'unschedulable: no worker or pool matches (nearest: worker secure-1, which requires 1 tag you may not see, which the request does not provide)',
    );
    expect(details).toEqual([
      'worker secure-1: requires 1 tag you may not see, which the request does not provide',
      'workers arm-1, arm-2: lack 2 tags you may not see; require 1 tag you may not see, which the request does not provide',
    ]);
  });

  it('names the minimums learned from the task history, with their source', () => {
    const requiredTags = [
      { tag: 'worker:build-arch:amd64', source: 'task-data:host_architecture' },
      { tag: 'worker:memory-gib>=13', source: 'history:sbuild:hello:amd64' },
      { tag: 'worker:memory-gib>=4', source: 'user-input' },
    ];
    const { details } = explain(
      pending(
        {
          state: 'WAITING_FOR_PROVISIONING',
          matchingPools: ['big'],
          mismatches: [pool('small', ['worker:memory-gib>=13'])],
        },
        { requiredTags },
      ),
    );
    expect(details).toEqual([
      'pool small: lack worker:memory-gib>=13',
      "learned from its task's history: worker:memory-gib>=13 (history:sbuild:hello:amd64)",
    ]);
    // Nothing learned: no such line; a request that no longer waits: no detail at all.
    expect(
      explain(
        pending(
          { state: 'WAITING_FOR_PROVISIONING', matchingPools: ['big'] },
          { requiredTags: requiredTags.slice(0, 1) },
        ),
      ).details,
    ).toEqual([]);
    expect(explain(pending({ state: 'NOT_PENDING' }, { status: 'RUNNING', requiredTags })).details).toEqual([]);
  });

  it('caps the groups listed', () => {
    const many = Array.from({ length: 11 }, (_, i) => group([`w${i}`], [`x:${i}`]));
    const { details } = explain(pending({ state: 'UNSCHEDULABLE', mismatches: many }));
    expect(details).toHaveLength(9);
    expect(details[8]).toBe('… and 3 more groups of workers or pools that do not match');
  });

  it.each([
    [
      'BLOCKED',
      { dependsOn: ['3', '4'], hiddenDependencyCount: 1 },
      'blocked: waiting for its dependencies to complete (3, 4 and 1 request you may not see)',
    ],
    ['ASSIGNED', { worker: { name: 'build-1' } }, 'assigned to worker build-1, which has not started it yet'],
    ['RUNNING', { worker: { name: 'build-1' } }, 'running on worker build-1'],
    ['COMPLETED', { result: 'FAILURE', statusReason: 'exit 1' }, 'completed: FAILURE (exit 1)'],
    ['ABORTED', { statusReason: 'aborted by admin' }, 'aborted: aborted by admin'],
  ] as [string, Partial<WhyData>, string][])(
    'a request that is %s says where it stands, with no detail',
    (status, extra, summary) => {
      const r = explain(pending({ state: 'NOT_PENDING', mismatches: [group(['a'], ['x:y'])] }, { status, ...extra }));
      expect(r).toEqual({ summary, details: [] });
    },
  );
});

describe('the start estimate in words', () => {
  const estimate = {
    at: '2026-06-01T12:05:00.000Z',
    waitSeconds: 300,
    basis: '4 requests ahead simulated on 1 slot of 1 available matching worker',
    medianAbsoluteErrorSeconds: 42,
    samples: 12,
  };
  it('when, from what, and how far off its class was', () => {
    expect(
      explain(pending({ state: 'WAITING_FOR_CAPACITY', busyWorkers: 1, matchingWorkers: 1, startEstimate: estimate }))
        .details,
    ).toEqual([
      'expected to start in 5m (2026-06-01T12:05:00.000Z); estimates of its class were off by 42s (median of the last 12)',
      'estimated from: 4 requests ahead simulated on 1 slot of 1 available matching worker',
    ]);
  });
  it('before any estimate of its class was checked; now; and none, with why', () => {
    expect(
      explain(
        pending({
          state: 'READY',
          availableWorkers: 1,
          startEstimate: { ...estimate, waitSeconds: 0, medianAbsoluteErrorSeconds: null, samples: 0 },
        }),
      ).details[0],
    ).toBe('expected to start now (2026-06-01T12:05:00.000Z); no estimate of its class has been checked yet');
    expect(
      explain(
        pending({
          state: 'UNSCHEDULABLE',
          startEstimate: { ...estimate, at: null, waitSeconds: null, basis: 'nothing can ever run it' },
        }),
      ).details,
    ).toEqual(['no start estimate: nothing can ever run it']);
  });
});
