/**
 * The diagnosis and the candidates in memory (src/scheduler/matching/diagnosis.ts, candidates.ts),
 * table-driven, without a database: why a request waits, from the workers' states and the pools, and
 * which workers could run each request, in name order.
 */
import { describe, expect, it } from 'vitest';
import { candidatesOf } from '../../../src/scheduler/matching/candidates.js';
import { diagnose, DIAGNOSIS_STATES } from '../../../src/scheduler/matching/diagnosis.js';
import type { WorkerState } from '../../../src/scheduler/matching/worker-state.js';
import { NO_HISTORY } from '../../../src/scheduler/rules/heavy-work.js';

const NOW = new Date('2026-06-01T12:00:00.000Z');
const worker = (id: number, name: string, over: Partial<WorkerState> = {}): WorkerState => ({
  id,
  name,
  type: 'worker',
  poolId: null,
  providedTags: ['os:linux', 'worker:cpu-count=4'],
  requiredTags: [],
  concurrency: 1,
  active: 0,
  unavailable: null,
  free: 1,
  idleSince: NOW,
  ...over,
});
const task = (over: Partial<Parameters<typeof diagnose>[0]> = {}): Parameters<typeof diagnose>[0] => ({
  id: 1,
  providedTags: [],
  requiredTags: ['os:linux'],
  status: 'PENDING',
  taskType: 'worker',
  taskName: 'noop',
  ...over,
});

describe('the diagnosis of a request', () => {
  const cases: {
    name: string;
    workers: WorkerState[];
    over?: Parameters<typeof task>[0];
    backoffs?: { workerId: number; until: Date }[];
    state: string;
  }[] = [
    { name: 'a free matching worker: READY', workers: [worker(1, 'a')], state: DIAGNOSIS_STATES.READY },
    {
      name: 'matching workers all busy: WAITING_FOR_CAPACITY',
      workers: [worker(1, 'a', { active: 1, free: 0 })],
      state: DIAGNOSIS_STATES.WAITING_FOR_CAPACITY,
    },
    {
      name: 'matching workers unavailable: WAITING_FOR_WORKERS',
      workers: [worker(1, 'a', { unavailable: 'DISCONNECTED', free: 0 })],
      state: DIAGNOSIS_STATES.WAITING_FOR_WORKERS,
    },
    {
      name: 'the only free matching worker released it: WAITING_FOR_BACKOFF',
      workers: [worker(1, 'a')],
      backoffs: [{ workerId: 1, until: new Date(NOW.getTime() + 60_000) }],
      state: DIAGNOSIS_STATES.WAITING_FOR_BACKOFF,
    },
    {
      name: 'no worker and no pool: UNSCHEDULABLE',
      workers: [worker(1, 'a', { providedTags: ['os:macos'] })],
      state: DIAGNOSIS_STATES.UNSCHEDULABLE,
    },
    {
      name: 'not pending: NOT_PENDING',
      workers: [worker(1, 'a')],
      over: { status: 'RUNNING' },
      state: DIAGNOSIS_STATES.NOT_PENDING,
    },
    {
      name: 'a workflow: ORCHESTRATED',
      workers: [worker(1, 'a')],
      over: { taskType: 'workflow' },
      state: DIAGNOSIS_STATES.ORCHESTRATED,
    },
  ];
  for (const c of cases)
    it(c.name, () => expect(diagnose(task(c.over), c.workers, [], c.backoffs).state).toBe(c.state));

  it('names what is missing on each side, and the placement of a pending request', () => {
    const d = diagnose(
      task({ providedTags: [] }),
      [
        worker(1, 'b', { requiredTags: ['team:a'] }),
        worker(2, 'a', { providedTags: ['os:linux', 'worker:cpu-count=8'] }),
        worker(3, 'c'),
      ],
      [],
      [],
      {
        history: NO_HISTORY,
        eligibleCount: () => 1,
      },
    );
    expect(d.mismatches.map((m) => [m.workerNames, m.missingOnWorker, m.missingOnTask])).toEqual([
      [['b'], [], ['team:a']],
    ]);
    // Light work: the smallest first.
    expect(d.placement?.preferredWorkers).toEqual(['c', 'a']);
    expect(d.placement?.decidedBy).toBe('SMALLEST_FOR_LIGHT');
  });
});

describe('the candidates of requests', () => {
  it('each request gets the workers that could run it, in name order; available only: those with a free slot', () => {
    const workers = [
      worker(1, 'b'),
      worker(2, 'a', { free: 0, active: 1 }),
      worker(3, 'c', { providedTags: ['os:macos'] }),
      worker(4, 'd', { requiredTags: ['team:a'] }),
    ];
    const tasks = [
      { id: 10, providedTags: [], requiredTags: ['os:linux'] },
      { id: 11, providedTags: ['team:a'], requiredTags: ['os:linux'] },
      { id: 12, providedTags: [], requiredTags: ['os:macos'] },
    ];
    const names = (m: Map<number, WorkerState[]>) => [...m].map(([id, list]) => [id, list.map((w) => w.name)]);
    expect(names(candidatesOf(tasks, workers, false))).toEqual([
      [10, ['a', 'b']],
      [11, ['a', 'b', 'd']],
      [12, ['c']],
    ]);
    expect(names(candidatesOf(tasks, workers, true))).toEqual([
      [10, ['b']],
      [11, ['b', 'd']],
      [12, ['c']],
    ]);
  });
});
