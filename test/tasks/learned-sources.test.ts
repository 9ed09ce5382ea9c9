import { describe, expect, it } from 'vitest';
import {
  learnedFigure,
  learnedHistoryOf,
  learnedRequiredTags,
  type FigureSources,
} from '../../src/core/tasks/learned-requirements.js';

// The rule that keeps one worker from deciding a learned minimum: at least two workers reported the
// figure, and it is the 95th percentile capped by the second-highest worker's highest figure.
const GIB = 1024 ** 3;
const HELLO = { taskType: 'worker', taskName: 'sbuild', package: 'hello', architecture: 'amd64' };
const sources = (p95: number, workerMaxima: number[], count = 5): FigureSources => ({ count, p95, workerMaxima });

describe('the figure a learned minimum is made of', () => {
  it.each([
    { case: 'no history', in: null, out: null },
    { case: 'one worker, however many runs', in: sources(10 * GIB, [10 * GIB], 100), out: null },
    { case: 'no worker recorded (counted before workers were)', in: sources(10 * GIB, []), out: null },
    {
      case: 'two workers alike: the 95th percentile',
      in: sources(10 * GIB, [10 * GIB, 10 * GIB]),
      out: { count: 5, p95: 10 * GIB },
    },
    {
      case: 'the 95th percentile under the second worker',
      in: sources(6 * GIB, [10 * GIB, 8 * GIB]),
      out: { count: 5, p95: 6 * GIB },
    },
    {
      case: "one worker's outlier: capped by the second worker",
      in: sources(2 ** 50, [2 ** 50, 3 * GIB]),
      out: { count: 5, p95: 3 * GIB },
    },
    { case: 'maxima in any order', in: sources(2 ** 50, [2 * GIB, 2 ** 50, 3 * GIB]), out: { count: 5, p95: 3 * GIB } },
    {
      case: 'two outliers from two workers decide (two bad sources)',
      in: sources(2 ** 50, [2 ** 50, 2 ** 49, GIB]),
      out: { count: 5, p95: 2 ** 49 },
    },
  ])('$case', ({ in: given, out }) => {
    expect(learnedFigure(given)).toEqual(out);
  });

  it('makes the tags: a worker that reports the largest figures moves the minimum no higher than the other worker saw', () => {
    const history = learnedHistoryOf(HELLO, {
      memory: sources(2 ** 50, [2 ** 50, 3 * GIB], 4),
      disk: sources(2 ** 50, [2 ** 50], 4),
    });
    expect(history).toEqual({ key: HELLO, memory: { count: 4, p95: 3 * GIB }, disk: null });
    expect(learnedRequiredTags(HELLO, history)).toEqual([
      { tag: 'worker:memory-gib>=4', source: 'history:sbuild:hello:amd64' },
    ]);
    // Fewer than three runs in all still make nothing, whatever the workers.
    expect(
      learnedRequiredTags(
        HELLO,
        learnedHistoryOf(HELLO, { memory: sources(10 * GIB, [10 * GIB, 10 * GIB], 2), disk: null }),
      ),
    ).toEqual([]);
  });
});
