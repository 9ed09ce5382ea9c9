/**
 * The start estimate's simulation in memory (src/scheduler/matching/start-estimate.ts), table-driven,
 * without a database: the requests ahead and the request itself take the earliest free slot in turn
 * (worker concurrency counts), hold it for their expected run, and launching workers and pools with
 * room add slots after their launch time.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_LAUNCH_SECONDS,
  simulateStart,
  SIMULATED_AHEAD,
  type StartEstimateInput,
} from '../../../src/scheduler/matching/start-estimate.js';

const NOW = new Date('2026-06-01T12:00:00.000Z');
const at = (seconds: number) => new Date(NOW.getTime() + seconds * 1000);
const input = (over: Partial<StartEstimateInput>): StartEstimateInput => ({
  now: NOW,
  workers: [],
  launching: [],
  pools: [],
  ahead: 0,
  aheadSeconds: [],
  ...over,
});
const sixty = (n: number) => Array.from({ length: n }, () => 60);

describe('simulateStart', () => {
  const cases: { name: string; input: StartEstimateInput; wait: number | null }[] = [
    {
      name: 'one busy worker of concurrency 1, its run ends in 20 s, 4 ahead of 60 s each: 4 × 60 + 20',
      input: input({ workers: [{ concurrency: 1, busyUntil: [at(20)] }], ahead: 4, aheadSeconds: sixty(4) }),
      wait: 260,
    },
    {
      name: 'an idle worker and nothing ahead: now',
      input: input({ workers: [{ concurrency: 1, busyUntil: [] }] }),
      wait: 0,
    },
    {
      name: 'a worker of concurrency 2, one slot free: the first ahead takes the free slot, it takes the other when its run ends',
      input: input({ workers: [{ concurrency: 2, busyUntil: [at(30)] }], ahead: 1, aheadSeconds: [60] }),
      wait: 30,
    },
    {
      name: 'two workers of concurrency 2 (4 slots), 6 ahead of 60 s: the 5th and 6th at 60, itself at 120',
      input: input({
        workers: [
          { concurrency: 2, busyUntil: [] },
          { concurrency: 2, busyUntil: [] },
        ],
        ahead: 6,
        aheadSeconds: sixty(6),
      }),
      wait: 60,
    },
    {
      name: 'different runs ahead: each takes the earliest slot (10 and 100 on two slots, then 30 after the 10)',
      input: input({
        workers: [
          { concurrency: 1, busyUntil: [] },
          { concurrency: 1, busyUntil: [] },
        ],
        ahead: 3,
        aheadSeconds: [10, 100, 30],
      }),
      wait: 40,
    },
    {
      name: 'a run overdue (expected end in the past) frees its slot now',
      input: input({ workers: [{ concurrency: 1, busyUntil: [at(-50)] }], ahead: 1, aheadSeconds: [60] }),
      wait: 60,
    },
    {
      name: 'a busy worker free in 600 s, a pool launching in 120 s (measured): the pool worker first',
      input: input({
        workers: [{ concurrency: 1, busyUntil: [at(600)] }],
        pools: [{ name: 'p', launchSeconds: 120, concurrency: 1, launchable: 3 }],
      }),
      wait: 120,
    },
    {
      name: 'a pool of concurrency 2 with room for one instance, 2 ahead: two slots after the launch, then the first to end',
      input: input({
        pools: [{ name: 'p', launchSeconds: 100, concurrency: 2, launchable: 1 }],
        ahead: 2,
        aheadSeconds: [60, 80],
      }),
      wait: 160,
    },
    {
      name: 'a pool never measured: the default launch time',
      input: input({ pools: [{ name: 'p', launchSeconds: null, concurrency: 1, launchable: 1 }] }),
      wait: DEFAULT_LAUNCH_SECONDS,
    },
    {
      name: 'an instance launching since 50 s, its pool launches in 90 s: its slot in 40 s',
      input: input({ launching: [{ since: at(-50), launchSeconds: 90, concurrency: 1 }] }),
      wait: 40,
    },
    { name: 'no slot at all: no estimate', input: input({ ahead: 3, aheadSeconds: sixty(3) }), wait: null },
    {
      name: 'a pool with no room adds no slot',
      input: input({ pools: [{ name: 'p', launchSeconds: 10, concurrency: 1, launchable: 0 }] }),
      wait: null,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = simulateStart(c.input);
      if (c.wait === null) {
        expect(got.at).toBeNull();
        expect(got.waitSeconds).toBeNull();
        expect(got.basis).toMatch(/no matching worker/);
      } else {
        expect(got.waitSeconds).toBeCloseTo(c.wait, 6);
        expect(got.at!.getTime()).toBe(NOW.getTime() + c.wait * 1000);
        expect(got.extrapolated).toBe(false);
      }
    });
  }

  it('beyond the simulated requests ahead the rest is extrapolated at their mean over all the slots, and says so', () => {
    const ahead = SIMULATED_AHEAD + 400;
    const got = simulateStart(
      input({ workers: [{ concurrency: 4, busyUntil: [] }], ahead, aheadSeconds: sixty(SIMULATED_AHEAD) }),
    );
    // Exact: 1400 ahead on 4 slots of 60 s = 350 rounds of 60 s. The extrapolation gives the same here.
    expect(got.waitSeconds).toBeCloseTo((ahead / 4) * 60, 6);
    expect(got.extrapolated).toBe(true);
    expect(got.basis).toContain('400 more ahead extrapolated');
  });

  it('the basis names the slots it simulated on', () => {
    const got = simulateStart(
      input({
        workers: [{ concurrency: 2, busyUntil: [at(5)] }],
        pools: [{ name: 'cloud', launchSeconds: null, concurrency: 1, launchable: 2 }],
        ahead: 1,
        aheadSeconds: [9],
      }),
    );
    expect(got.basis).toBe(
      '1 request ahead simulated on 2 slots of 1 available matching worker, up to 2 new workers of pool cloud after a launch of 300 s (default: none measured yet)',
    );
  });
});
