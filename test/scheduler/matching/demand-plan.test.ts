/**
 * The demand plan in memory (src/scheduler/matching/demand-plan.ts), table-driven, without a database:
 * idle slots serve first (static workers before pool workers), the rest goes to the pools that fit
 * within their limits, and what nothing fits is unschedulable, described only where the reader sees
 * a sample of it.
 */
import { describe, expect, it } from 'vitest';
import type { WorkerPool } from '../../../src/storage/entities/worker-pool.js';
import { ClassCache } from '../../../src/scheduler/matching/class-cache.js';
import {
  describeUnschedulable,
  LAUNCH_LIMITS,
  planDemand,
  type DemandInput,
} from '../../../src/scheduler/matching/demand-plan.js';
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
    const plan = planDemand(
      input({ counts: [{ class_id: LINUX, n: 2 }], workers: [worker(1, 'a', 2)], pools: [pool(7, 'p')] }),
      cache,
      NOW,
    );
    expect(plan.pools.map((p) => [p.pendingRunnable, p.pendingAssigned, p.idleCompatibleSlots, p.launch])).toEqual([
      [2, 0, 2, 0],
    ]);
    expect(plan.pendingTotal).toBe(2);
  });

  it('what idle slots leave goes to the pool, within its maximum of instances', () => {
    const plan = planDemand(
      input({ counts: [{ class_id: LINUX, n: 4 }], workers: [worker(1, 'a', 1)], pools: [pool(7, 'p')] }),
      cache,
      NOW,
    );
    const [p] = plan.pools;
    expect([p.pendingAssigned, p.workersRequired, p.launch, p.limitedBy]).toEqual([
      3,
      3,
      2,
      [LAUNCH_LIMITS.MAX_ACTIVE_INSTANCES],
    ]);
  });

  it('a pool over its monthly budget launches nothing, and says why', () => {
    const plan = planDemand(
      input({
        counts: [{ class_id: LINUX, n: 1 }],
        pools: [pool(7, 'p', { monthlyRuntimeBudgetSeconds: 100 })],
        runtime: new Map([[7, 100]]),
      }),
      cache,
      NOW,
    );
    expect(plan.pools.map((p) => [p.launch, p.limitedBy])).toEqual([[0, [LAUNCH_LIMITS.MONTHLY_BUDGET]]]);
  });

  it('a pool whose cost this month reached its monthly cost budget launches nothing, and says why', () => {
    const over = planDemand(
      input({
        counts: [{ class_id: LINUX, n: 1 }],
        pools: [pool(7, 'p', { monthlyCostBudget: 5 })],
        cost: new Map([[7, 5]]),
      }),
      cache,
      NOW,
    );
    expect(over.pools.map((p) => [p.launch, p.limitedBy, p.monthCost])).toEqual([[0, [LAUNCH_LIMITS.COST_BUDGET], 5]]);
    const under = planDemand(
      input({
        counts: [{ class_id: LINUX, n: 1 }],
        pools: [pool(7, 'p', { monthlyCostBudget: 5 })],
        cost: new Map([[7, 4.99]]),
      }),
      cache,
      NOW,
    );
    expect(under.pools.map((p) => [p.launch, p.limitedBy])).toEqual([[1, []]]);
  });

  it('a pool under its cost budget plans no more launches than the budget has room for, each counted at its first charge, and says why', () => {
    const dear = pool(7, 'p', { maxActiveInstances: 10, monthlyCostBudget: 1, pricePerHour: 1000 });
    const first = planDemand(input({ counts: [{ class_id: LINUX, n: 4 }], pools: [dear] }), cache, NOW);
    expect(first.pools.map((p) => [p.launch, p.limitedBy])).toEqual([[1, [LAUNCH_LIMITS.COST_BUDGET]]]);
    // Once one is launched, its first hour is committed: nothing more, whatever its cost so far.
    const then = planDemand(
      input({
        counts: [{ class_id: LINUX, n: 4 }],
        pools: [dear],
        cost: new Map([[7, 0.01]]),
        committed: new Map([[7, 1000]]),
      }),
      cache,
      NOW,
    );
    expect(then.pools.map((p) => [p.launch, p.limitedBy, p.monthCost])).toEqual([
      [0, [LAUNCH_LIMITS.COST_BUDGET], 0.01],
    ]);
  });

  it('a retired pool worker that holds nothing is to stop at once, whatever the idle timeout and the work waiting; one still running work is not', () => {
    const drained = { ...worker(2, 'b', 0, 7), unavailable: 'DRAINING' as const };
    const gone = { ...worker(3, 'c', 0, 7), unavailable: 'DISCONNECTED' as const };
    const busy = { ...worker(4, 'd', 0, 7), unavailable: 'DRAINING' as const, active: 1 };
    const retiring = new Map([
      [2, 'WORK_REQUESTS' as const],
      [3, 'LIFETIME' as const],
      [4, 'OUTDATED' as const],
    ]);
    const plan = planDemand(
      input({
        counts: [{ class_id: LINUX, n: 1 }],
        workers: [drained, gone, busy],
        pools: [pool(7, 'p', { maxActiveInstances: 4 })],
        retiring,
      }),
      cache,
      NOW,
    );
    const [p] = plan.pools;
    expect(p.stop.map((w) => w.name)).toEqual(['b', 'c']);
    expect([...p.retired]).toEqual([
      [2, 'WORK_REQUESTS'],
      [3, 'LIFETIME'],
    ]);
    // A retiring worker is not one starting up: the pending request gets a replacement.
    expect([p.startingInstances, p.launch]).toEqual([0, 1]);
  });

  it('static workers serve before pool workers: the idle pool worker past its timeout is stopped', () => {
    const idlePoolWorker = { ...worker(2, 'b', 1, 7), idleSince: new Date(NOW.getTime() - 3600_000) };
    const plan = planDemand(
      input({
        counts: [{ class_id: LINUX, n: 1 }],
        workers: [idlePoolWorker, worker(1, 'z', 1)],
        pools: [pool(7, 'p')],
      }),
      cache,
      NOW,
    );
    expect(plan.pools[0].stop.map((w) => w.name)).toEqual(['b']);
  });

  it('what nothing fits is unschedulable: described with a visible sample, else only counted', () => {
    const plan = planDemand(
      input({ counts: [{ class_id: MAC, n: 3 }], workers: [worker(1, 'a', 1)], pools: [pool(7, 'p')] }),
      cache,
      NOW,
    );
    expect(plan.unschedulable.map((u) => [u.cls.id, u.count])).toEqual([[MAC, 3]]);
    const shown = describeUnschedulable(plan, [pool(7, 'p')], [{ class_id: MAC, id: 42 }]);
    expect(shown.hiddenUnschedulableCount).toBe(0);
    expect(
      shown.unschedulable.map((g) => [g.count, g.sampleIds, g.nearest.map((n) => [n.pool, n.missingOnWorker])]),
    ).toEqual([
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

  describe('coming work (rules/look-ahead.ts)', () => {
    it('is served after pending work, by what idle slots and pools have left, and counted apart', () => {
      const plan = planDemand(
        input({
          counts: [{ class_id: LINUX, n: 1 }],
          coming: [{ class_id: LINUX, n: 2 }],
          workers: [worker(1, 'a', 2)],
          pools: [pool(7, 'p')],
        }),
        cache,
        NOW,
      );
      const [p] = plan.pools;
      // The idle worker's two slots: one for the pending request, one for the first coming one; the pool launches for the other.
      expect([
        plan.pendingTotal,
        plan.comingTotal,
        p.pendingRunnable,
        p.pendingAssigned,
        p.comingRunnable,
        p.comingAssigned,
        p.launch,
      ]).toEqual([1, 2, 1, 0, 2, 1, 1]);
    });

    it('a pool with coming work keeps its idle worker past the idle timeout', () => {
      const idle = { ...worker(1, 'pw', 1, 7), idleSince: new Date(NOW.getTime() - 3600_000) };
      const without = planDemand(input({ workers: [idle], pools: [pool(7, 'p')] }), cache, NOW);
      expect(without.pools[0].stop.map((w) => w.name)).toEqual(['pw']);
      const withComing = planDemand(
        input({ coming: [{ class_id: LINUX, n: 2 }], workers: [idle], pools: [pool(7, 'p')] }),
        cache,
        NOW,
      );
      expect(withComing.pools[0].stop).toEqual([]);
      expect(withComing.pools[0].launch).toBe(1);
    });

    it('counts for nothing where no worker and no pool could run it: never unschedulable, never launched for', () => {
      const plan = planDemand(input({ coming: [{ class_id: MAC, n: 5 }], pools: [pool(7, 'p')] }), cache, NOW);
      expect([plan.comingTotal, plan.unschedulable.length, plan.pools[0].comingRunnable, plan.pools[0].launch]).toEqual(
        [0, 0, 0, 0],
      );
    });
  });

  describe('scale-in and warm capacity (rules/scale-in.ts)', () => {
    const idleFor = (id: number, name: string, idleSeconds: number, createdSecondsAgo: number): WorkerState => ({
      ...worker(id, name, 1, 7),
      idleSince: new Date(NOW.getTime() - idleSeconds * 1000),
      instanceCreatedAt: new Date(NOW.getTime() - createdSecondsAgo * 1000),
    });

    it('billed by the hour: an idle instance past the timeout stops only near the end of its paid hour, nearest first', () => {
      const workers = [
        idleFor(1, 'mid-hour', 1200, 1800),
        idleFor(2, 'near-end', 1200, 3500),
        idleFor(3, 'near-end-2', 1200, 3400),
      ];
      const plan = planDemand(input({ workers, pools: [pool(7, 'p', { billingPeriodSeconds: 3600 })] }), cache, NOW);
      expect(plan.pools[0].stop.map((w) => w.name)).toEqual(['near-end', 'near-end-2']);
      const unbilled = planDemand(input({ workers, pools: [pool(7, 'p')] }), cache, NOW);
      expect(unbilled.pools[0].stop.map((w) => w.name).sort()).toEqual(['mid-hour', 'near-end', 'near-end-2']);
    });

    it('no stop within the scale-down delay after a launch', () => {
      const workers = [idleFor(1, 'w', 1200, 1800)];
      const launches = new Map([[7, { lastMinute: 0, lastAt: new Date(NOW.getTime() - 300_000) }]]);
      expect(
        planDemand(input({ workers, launches, pools: [pool(7, 'p', { scaleDownDelaySeconds: 600 })] }), cache, NOW)
          .pools[0].stop,
      ).toEqual([]);
      expect(
        planDemand(
          input({ workers, launches, pools: [pool(7, 'p', { scaleDownDelaySeconds: 200 })] }),
          cache,
          NOW,
        ).pools[0].stop.map((w) => w.name),
      ).toEqual(['w']);
    });

    it('the launch rate limit cuts launches and says so', () => {
      const launches = new Map([[7, { lastMinute: 2, lastAt: NOW }]]);
      const plan = planDemand(
        input({
          counts: [{ class_id: LINUX, n: 5 }],
          launches,
          pools: [pool(7, 'p', { maxActiveInstances: 10, maxLaunchesPerMinute: 3 })],
        }),
        cache,
        NOW,
      );
      expect([plan.pools[0].launch, plan.pools[0].limitedBy]).toEqual([1, [LAUNCH_LIMITS.RATE_LIMIT]]);
    });

    it('warm capacity: the schedule’s minimum idle in its period, the pool’s outside', () => {
      const warmSchedule = {
        timeZone: 'UTC',
        periods: [{ days: ['MON' as const], from: '11:00', to: '13:00', minIdleInstances: 2 }],
      };
      // NOW is Monday 1 June 2026, 12:00 UTC.
      expect(planDemand(input({ pools: [pool(7, 'p', { warmSchedule })] }), cache, NOW).pools[0].launch).toBe(2);
      expect(
        planDemand(input({ pools: [pool(7, 'p', { warmSchedule })] }), cache, new Date('2026-06-01T14:00:00Z')).pools[0]
          .launch,
      ).toBe(0);
    });
  });

  describe('idle workers that share their resources', () => {
    const res = (cpus: number, memoryGib = 0) => ({ cpus, memoryMib: memoryGib * 1024, diskMib: 0 });
    const sharingPool = pool(7, 'hosts', {
      specifications: { offersResources: true, cpuCount: 16, memoryGib: 64, diskGib: 100, concurrency: 16 },
      maxActiveInstances: 10,
    });

    it('serve only the requests that fit what they have free; the rest goes to the pool', () => {
      // A host with 16 free slots but 8 CPUs free: two 4-CPU requests, not ten.
      const plan = planDemand(
        input({
          counts: [{ class_id: LINUX, n: 10 }],
          reservations: new Map([[LINUX, [{ request: res(4, 4), n: 10 }]]]),
          workers: [worker(1, 'host', 16)],
          hostFree: new Map([[1, res(8, 64)]]),
          pools: [sharingPool],
        }),
        cache,
        NOW,
      );
      const [p] = plan.pools;
      expect([p.pendingRunnable, p.pendingAssigned]).toEqual([10, 8]);
      expect(p.resourcePlan).toMatchObject({ requests: 8, reserved: res(32, 32), machines: 2 });
    });

    it("take the class's requests in queue order while they fit, then leave the rest to slotted workers", () => {
      // The host fits the first (8 CPUs) but not the next (12): the slotted worker takes the next two.
      const plan = planDemand(
        input({
          counts: [{ class_id: LINUX, n: 4 }],
          reservations: new Map([
            [
              LINUX,
              [
                { request: res(8), n: 1 },
                { request: res(12), n: 3 },
              ],
            ],
          ]),
          workers: [worker(1, 'host', 16), worker(2, 'slots', 2)],
          hostFree: new Map([[1, res(10)]]),
          pools: [sharingPool],
        }),
        cache,
        NOW,
      );
      const [p] = plan.pools;
      expect(p.pendingAssigned).toBe(1);
      expect(p.resourcePlan).toMatchObject({ requests: 1, reserved: res(12) });
    });

    it('count slots alone when no free resources are given for them', () => {
      const plan = planDemand(
        input({
          counts: [{ class_id: LINUX, n: 10 }],
          reservations: new Map([[LINUX, [{ request: res(4, 4), n: 10 }]]]),
          workers: [worker(1, 'host', 16)],
          pools: [sharingPool],
        }),
        cache,
        NOW,
      );
      expect(plan.pools[0].pendingAssigned).toBe(0);
    });
  });
});
