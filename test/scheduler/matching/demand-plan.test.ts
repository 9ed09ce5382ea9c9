/**
 * The demand plan in memory (src/scheduler/matching/demand-plan.ts), table-driven, without a database:
 * idle slots serve first (static workers before pool workers), the rest goes to the pools that fit
 * within their limits, and what nothing fits is unschedulable, described only where the reader sees
 * a sample of it.
 */
import { describe, expect, it } from 'vitest';
import type { WorkerPool } from '../../../src/entities/worker-pool.js';
import { ClassCache } from '../../../src/scheduler/matching/class-cache.js';
import { describeUnschedulable, LAUNCH_LIMITS, planDemand, type DemandInput } from '../../../src/scheduler/matching/demand-plan.js';
import type { WorkerState } from '../../../src/scheduler/matching/worker-state.js';
import type { PoolTemplate } from '../../../src/scheduler/matching/pool-template.js';

const NOW = new Date('2026-06-01T12:00:00.000Z');
const LINUX = 1;
const MAC = 2;
const cache = new ClassCache();
cache.add([
  { id: LINUX, requiredTags: ['os:linux'], significantProvidedTags: [] },
  { id: MAC, requiredTags: ['os:macos'], significantProvidedTags: [] },
]);

const worker = (id: number, name: string, free: number, poolId: number | null = null): WorkerState => ({
  id,
  name,
  type: 'worker',
  poolId,
  providedTags: ['os:linux'],
  requiredTags: [],
  concurrency: Math.max(free, 1),
  active: 0,
  unavailable: null,
  free,
  idleSince: NOW,
});
const pool = (id: number, name: string, options: Partial<WorkerPool> = {}): PoolTemplate => ({
  // The fields of a pool the plan reads; the rest of the entity is not involved.
  pool: {
    id,
    name,
    specifications: {},
    maxActiveInstances: 2,
    minIdleInstances: 0,
    idleTimeoutSeconds: 600,
    targetLatencySeconds: 600,
    monthlyRuntimeBudgetSeconds: null,
    launchFailures: 0,
    launchRetryAt: null,
    lastErrorKind: null,
    ...options,
  } as WorkerPool,
  type: 'worker',
  providedTags: ['os:linux'],
  requiredTags: [],
});
const input = (over: Partial<DemandInput>): DemandInput => ({
  counts: [],
  workers: [],
  pools: [],
  averageSeconds: new Map(),
  runtime: new Map(),
  degradedAfterFailures: 3,
  ...over,
});

describe('the demand plan', () => {
  it('idle slots serve first: nothing is left to the pool', () => {
    const plan = planDemand(input({ counts: [{ class_id: LINUX, n: 2 }], workers: [worker(1, 'a', 2)], pools: [pool(7, 'p')] }), cache, NOW);
    expect(plan.pools.map((p) => [p.pendingRunnable, p.pendingAssigned, p.idleCompatibleSlots, p.launch])).toEqual([[2, 0, 2, 0]]);
    expect(plan.pendingTotal).toBe(2);
  });

  it('what idle slots leave goes to the pool, within its maximum of instances', () => {
    const plan = planDemand(input({ counts: [{ class_id: LINUX, n: 4 }], workers: [worker(1, 'a', 1)], pools: [pool(7, 'p')] }), cache, NOW);
    const [p] = plan.pools;
    expect([p.pendingAssigned, p.workersRequired, p.launch, p.limitedBy]).toEqual([3, 3, 2, [LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES]]);
  });

  it('a pool over its monthly budget launches nothing, and says why', () => {
    const plan = planDemand(input({ counts: [{ class_id: LINUX, n: 1 }], pools: [pool(7, 'p', { monthlyRuntimeBudgetSeconds: 100 })], runtime: new Map([[7, 100]]) }), cache, NOW);
    expect(plan.pools.map((p) => [p.launch, p.limitedBy])).toEqual([[0, [LAUNCH_LIMITS.MONTHLY_BUDGET]]]);
  });

  it('static workers serve before pool workers: the idle pool worker past its timeout is stopped', () => {
    const idlePoolWorker = { ...worker(2, 'b', 1, 7), idleSince: new Date(NOW.getTime() - 3600_000) };
    const plan = planDemand(input({ counts: [{ class_id: LINUX, n: 1 }], workers: [idlePoolWorker, worker(1, 'z', 1)], pools: [pool(7, 'p')] }), cache, NOW);
    expect(plan.pools[0].stop.map((w) => w.name)).toEqual(['b']);
  });

  it('what nothing fits is unschedulable: described with a visible sample, else only counted', () => {
    const plan = planDemand(input({ counts: [{ class_id: MAC, n: 3 }], workers: [worker(1, 'a', 1)], pools: [pool(7, 'p')] }), cache, NOW);
    expect(plan.unschedulable.map((u) => [u.cls.id, u.count])).toEqual([[MAC, 3]]);
    const shown = describeUnschedulable(plan, [pool(7, 'p')], [{ class_id: MAC, id: 42 }]);
    expect(shown.hiddenUnschedulableCount).toBe(0);
    expect(shown.unschedulable.map((g) => [g.count, g.sampleIds, g.nearest.map((n) => [n.pool, n.missingOnWorker])])).toEqual([
      [
        3,
        [42],
        [
          [null, ['os:macos']],
          ['p', ['os:macos']],
        ],
      ],
    ]);
    expect(describeUnschedulable(plan, [pool(7, 'p')], [])).toEqual({ unschedulable: [], hiddenUnschedulableCount: 3 });
  });
});
