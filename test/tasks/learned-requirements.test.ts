import { describe, expect, it } from 'vitest';
import { analyzeWorkRequest } from '../../src/core/tasks/analyze.js';
import { learnedGib, learnedRequiredTags, type LearnedHistory } from '../../src/core/tasks/learned-requirements.js';
import { statisticsKeyOf } from '../../src/core/tasks/statistics-key.js';
import { AMD64_ENV, sbuildRequest, triples } from './fixtures.js';

// The pure half of learned minimums: which tags a history makes for a request, and where the analysis puts them.
const GIB = 1024 ** 3;
const HELLO = { taskType: 'worker', taskName: 'sbuild', package: 'hello', architecture: 'amd64' };
const history = (memoryP95: number, diskP95: number, count = 5, key = HELLO): LearnedHistory => ({
  key,
  memory: { count, p95: memoryP95 },
  disk: { count, p95: diskP95 },
});

describe('learned minimums', () => {
  it('are the 95th percentile × 1.25 rounded up to a whole GiB, and nothing at or under 1 GiB', () => {
    expect(learnedGib(10 * GIB)).toBe(13);
    expect(learnedGib(8 * GIB)).toBe(10);
    expect(learnedGib(0.8 * GIB)).toBeNull(); // 1 GiB: the floor
    expect(learnedGib(0.81 * GIB)).toBe(2);
    expect(learnedGib(Number.POSITIVE_INFINITY)).toBeNull();
  });

  it('need enough runs and the same task, package and architecture', () => {
    expect(learnedRequiredTags(HELLO, history(10 * GIB, 30 * GIB))).toEqual([
      { tag: 'worker:memory-gib>=13', source: 'history:sbuild:hello:amd64' },
      { tag: 'worker:disk-gib>=38', source: 'history:sbuild:hello:amd64' },
    ]);
    expect(learnedRequiredTags(HELLO, history(10 * GIB, 30 * GIB, 2))).toEqual([]);
    expect(learnedRequiredTags({ ...HELLO, architecture: 'arm64' }, history(10 * GIB, 30 * GIB))).toEqual([]);
    expect(learnedRequiredTags(HELLO, { key: HELLO, memory: null, disk: { count: 3, p95: 4 * GIB } })).toEqual([
      { tag: 'worker:disk-gib>=5', source: 'history:sbuild:hello:amd64' },
    ]);
    expect(learnedRequiredTags(HELLO, null)).toEqual([]);
  });

  it('are frozen by the analysis as system tags next to a user minimum, for the key the analysis derives', () => {
    const input = sbuildRequest({ userRequiredTags: ['worker:memory-gib>=64'] });
    const plain = analyzeWorkRequest(input);
    if (!plain.ok) throw new Error(JSON.stringify(plain.errors));
    expect(statisticsKeyOf('worker', 'sbuild', plain.provided, plain.required)).toEqual(HELLO);
    const learned = analyzeWorkRequest({ ...input, learned: history(10 * GIB, 30 * GIB) });
    if (!learned.ok) throw new Error(JSON.stringify(learned.errors));
    expect(triples(learned.required)).toEqual(
      expect.arrayContaining([
        ['worker:memory-gib>=13', 'system', 'history:sbuild:hello:amd64'],
        ['worker:memory-gib>=64', 'user', 'user-input'],
        ['worker:disk-gib>=38', 'system', 'history:sbuild:hello:amd64'],
      ]),
    );
    expect(learned.dropped).toEqual([]);
    // The history of another architecture adds nothing to this request.
    const other = analyzeWorkRequest({
      ...input,
      learned: history(10 * GIB, 30 * GIB, 5, { ...HELLO, architecture: 'arm64' }),
    });
    expect(other).toEqual(plain);
    // With an environment, the architecture is the environment's (a cross build for arm64 runs on amd64).
    const env = analyzeWorkRequest(
      sbuildRequest({
        taskData: { source_package: 'hello', host_architecture: 'arm64', environment_id: AMD64_ENV.id },
        environment: AMD64_ENV,
      }),
    );
    if (!env.ok) throw new Error(JSON.stringify(env.errors));
    expect(statisticsKeyOf('worker', 'sbuild', env.provided, env.required)).toEqual(HELLO);
  });
});
