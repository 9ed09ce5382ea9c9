import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { suggestedParallelism } from '../../src/agent/parallelism.js';

describe('suggestedParallelism', () => {
  it.each<[string, number, number, number, number]>([
    ['an idle machine, one task', 8, 0, 1, 8],
    ['background noise does not cost a CPU', 8, 0.3, 1, 8],
    ['other load leaves the rest', 8, 3, 1, 5],
    ['two tasks share the idle CPUs', 8, 0, 2, 4],
    ['two tasks share what the load leaves', 8, 3, 2, 3],
    ['a second task next to a -j8 build gets one', 8, 8, 2, 1],
    ['an overloaded machine still gives one', 4, 12, 1, 1],
    ['one CPU', 1, 0, 1, 1],
    ['more tasks than CPUs', 2, 0, 5, 1],
    ['no load average (0 on some platforms)', 16, 0, 3, 5],
    ['a load that is not a number counts as none', 4, Number.NaN, 1, 4],
  ])('%s: %d cpus, load %d, %d running → %d', (_name, cpuCount, load1, running, expected) => {
    expect(suggestedParallelism({ cpuCount, load1, running })).toBe(expected);
  });

  it('is always between 1 and the cpu count', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 512 }),
        fc.double({ min: 0, max: 1000, noNaN: true }),
        fc.integer({ min: 0, max: 64 }),
        (cpuCount, load1, running) => {
          const n = suggestedParallelism({ cpuCount, load1, running });
          return Number.isInteger(n) && n >= 1 && n <= cpuCount;
        },
      ),
    );
  });

  it('never grows when the load or the number of tasks grows', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 128 }),
        fc.double({ min: 0, max: 200, noNaN: true }),
        fc.double({ min: 0, max: 50, noNaN: true }),
        fc.integer({ min: 1, max: 16 }),
        (cpuCount, load1, more, running) => {
          const base = suggestedParallelism({ cpuCount, load1, running });
          return (
            suggestedParallelism({ cpuCount, load1: load1 + more, running }) <= base &&
            suggestedParallelism({ cpuCount, load1, running: running + 1 }) <= base
          );
        },
      ),
    );
  });
});
