/**
 * The pass's matching in memory (src/scheduler/matching/pass-matching.ts), table-driven, without a
 * database: heads in queue order, each to the first free worker of its class in the order of
 * preference for its kind of work and not backed off from it; capped, skipping held requests; and
 * which classes must read more heads before the matching is the full read's.
 */
import { describe, expect, it } from 'vitest';
import { mergeHeads, PassMatching, type FreeWorker, type Head } from '../../../src/scheduler/matching/pass-matching.js';
import type { Backoff } from '../../../src/scheduler/rules/release-backoff.js';

const NOW = new Date('2026-06-01T12:00:00.000Z');
const head = (id: number, classId: number, prio = 0, fairKey = 0): Head => ({
  id,
  classId,
  prio,
  fairKey: BigInt(fairKey),
  createdUs: BigInt(id),
});
const worker = (
  id: number,
  free: number,
  eligible: number[],
  options: { pooled?: boolean; cpus?: number } = {},
): FreeWorker => ({
  id,
  free,
  eligible,
  pooled: options.pooled ?? false,
  size: [options.cpus ?? 1, 1],
  speed: 0,
});
const light = () => false;

/** A matching with every head of `heads` read at once (each class read to its end). */
function matched(
  workers: FreeWorker[],
  heads: Head[],
  options: { heavy?: (h: Head) => boolean; backoffs?: Map<number, Backoff[]>; max?: number; skipped?: number[] } = {},
) {
  const m = new PassMatching(workers, NOW, options.max ?? 1000, { firstHeads: 1000 });
  const sorted = [...heads].sort((a, b) => b.prio - a.prio || Number(a.fairKey - b.fairKey) || a.id - b.id);
  m.add(m.classIds, sorted, options.backoffs ?? new Map(), options.heavy ?? light);
  return m.match(new Set(options.skipped ?? [])).out.map((x) => [x.workRequestId, x.workerId]);
}

describe('the matching of a pass', () => {
  const cases: {
    name: string;
    workers: FreeWorker[];
    heads: Head[];
    options?: Parameters<typeof matched>[2];
    expected: number[][];
  }[] = [
    {
      name: 'queue order: the higher priority first, then the earlier fair key',
      workers: [worker(1, 2, [10])],
      heads: [head(101, 10, 0, 5), head(102, 10, 1, 9), head(103, 10, 0, 1)],
      expected: [
        [102, 1],
        [103, 1],
      ],
    },
    {
      name: 'static workers before pool workers, then the smallest for light work',
      workers: [
        worker(1, 1, [10], { pooled: true, cpus: 1 }),
        worker(2, 1, [10], { cpus: 8 }),
        worker(3, 1, [10], { cpus: 2 }),
      ],
      heads: [head(101, 10), head(102, 10), head(103, 10)],
      expected: [
        [101, 3],
        [102, 2],
        [103, 1],
      ],
    },
    {
      name: 'the largest first for heavy work',
      workers: [worker(1, 1, [10], { cpus: 2 }), worker(2, 1, [10], { cpus: 8 })],
      heads: [head(101, 10)],
      options: { heavy: () => true },
      expected: [[101, 2]],
    },
    {
      name: 'the specialised before the generalist',
      workers: [worker(1, 1, [10, 20]), worker(2, 1, [10])],
      heads: [head(101, 10)],
      expected: [[101, 2]],
    },
    {
      name: 'a request is not offered to the worker it is backed off from; an ended backoff does not count',
      workers: [worker(1, 1, [10]), worker(2, 1, [10])],
      heads: [head(101, 10), head(102, 10)],
      options: {
        backoffs: new Map([
          [101, [{ workerId: 1, until: new Date(NOW.getTime() + 1000) }]],
          [102, [{ workerId: 2, until: NOW }]],
        ]),
      },
      expected: [
        [101, 2],
        [102, 1],
      ],
    },
    {
      name: 'a class no free worker runs blocks nothing behind it',
      workers: [worker(1, 1, [10]), worker(2, 1, [20])],
      heads: [head(101, 10, 5), head(102, 10, 4), head(103, 20, 0)],
      expected: [
        [101, 1],
        [103, 2],
      ],
    },
    {
      name: 'at most maxAssignments',
      workers: [worker(1, 3, [10])],
      heads: [head(101, 10), head(102, 10), head(103, 10)],
      options: { max: 2 },
      expected: [
        [101, 1],
        [102, 1],
      ],
    },
    {
      name: 'a request held by a concurrent caller is skipped',
      workers: [worker(1, 1, [10])],
      heads: [head(101, 10), head(102, 10)],
      options: { skipped: [101] },
      expected: [[102, 1]],
    },
  ];
  for (const c of cases) it(c.name, () => expect(matched(c.workers, c.heads, c.options)).toEqual(c.expected));

  it('matching again starts from the same free slots', () => {
    const m = new PassMatching([worker(1, 1, [10])], NOW, 10, { firstHeads: 10 });
    m.add(m.classIds, [head(101, 10), head(102, 10)], new Map(), light);
    expect(m.match(new Set()).out).toEqual([{ workRequestId: 101, workerId: 1 }]);
    expect(m.match(new Set([101])).out).toEqual([{ workRequestId: 102, workerId: 1 }]);
  });

  it('reads more heads only where unread ones could change the matching', () => {
    const m = new PassMatching([worker(1, 3, [10]), worker(2, 1, [20])], NOW, 100, { firstHeads: 1 });
    expect(m.toRead(m.classIds)).toEqual({ classes: [10, 20], limits: [1, 1], skips: [0, 0] });
    m.add(m.classIds, [head(101, 10), head(201, 20)], new Map(), light);
    const first = m.match(new Set());
    // Class 10 has two slots left after its only head read; class 20's worker is full: settled.
    expect(first.settled.has(20)).toBe(true);
    expect(first.freeAfter.get(10)).toBe(2);
    expect(m.growth(0, first)).toEqual([10]);
    expect(m.toRead([10])).toEqual({ classes: [10], limits: [2], skips: [1] });
    // The class's queue ends before the limit: nothing more to read.
    m.add([10], [head(102, 10)], new Map(), light);
    const second = m.match(new Set());
    expect(second.out.map((x) => x.workRequestId)).toEqual([101, 102, 201]);
    expect(m.growth(1, second)).toEqual([]);
  });

  it('a head read twice is kept once', () => {
    const m = new PassMatching([worker(1, 2, [10])], NOW, 100, { firstHeads: 1 });
    m.add([10], [head(101, 10)], new Map(), light);
    expect(m.add([10], [head(101, 10), head(102, 10)], new Map(), light).map((h) => h.id)).toEqual([102]);
    expect(m.match(new Set()).out.map((x) => x.workRequestId)).toEqual([101, 102]);
  });

  it('mergeHeads keeps queue order', () => {
    expect(mergeHeads([head(1, 1, 1), head(3, 1, 0)], [head(2, 2, 1), head(4, 2, 0)]).map((h) => h.id)).toEqual([
      1, 2, 3, 4,
    ]);
  });
});
