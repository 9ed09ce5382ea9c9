import { describe, expect, it } from 'vitest';
import { runLimits } from '../../src/agent/run-limits.js';

const MIB = 2 ** 20;

describe('a run’s limits (src/agent/run-limits.ts)', () => {
  it.each([
    ['slots: the load’s suggestion, no limit', null, 3, null, { parallel: 3, memoryLimitBytes: null, cpuWeight: null }],
    [
      'slots: --handler-memory-limit alone',
      null,
      3,
      512 * MIB,
      { parallel: 3, memoryLimitBytes: 512 * MIB, cpuWeight: null },
    ],
    [
      'shared: the reservation',
      { cpus: 2, memoryMib: 12288 },
      7,
      null,
      { parallel: 2, memoryLimitBytes: 12288 * MIB, cpuWeight: 200 },
    ],
    [
      'shared: the smaller memory limit wins (the agent’s)',
      { cpus: 4, memoryMib: 4096 },
      1,
      1024 * MIB,
      { parallel: 4, memoryLimitBytes: 1024 * MIB, cpuWeight: 400 },
    ],
    [
      'shared: the smaller memory limit wins (the reservation’s)',
      { cpus: 4, memoryMib: 512 },
      1,
      1024 * MIB,
      { parallel: 4, memoryLimitBytes: 512 * MIB, cpuWeight: 400 },
    ],
    [
      'shared: 0 memory sets no limit, 0 CPUs the default weight and -j1',
      { cpus: 0, memoryMib: 0 },
      5,
      null,
      { parallel: 1, memoryLimitBytes: null, cpuWeight: null },
    ],
    [
      'shared: a tiny memory reservation is raised to 4 MiB',
      { cpus: 1, memoryMib: 1 },
      5,
      null,
      { parallel: 1, memoryLimitBytes: 4 * MIB, cpuWeight: 100 },
    ],
    [
      'shared: the weight stops at cgroup v2’s 10000',
      { cpus: 1024, memoryMib: 1024 },
      5,
      null,
      { parallel: 1024, memoryLimitBytes: 1024 * MIB, cpuWeight: 10_000 },
    ],
  ] as const)('%s', (_name, reservation, suggested, configured, expected) => {
    expect(runLimits(reservation, suggested, configured)).toEqual(expected);
  });
});
