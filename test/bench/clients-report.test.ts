/**
 * The client phase's comparison with a release (bench/clients-report.ts): a figure worse than the
 * release's by more than 10 % is named, a better one or one within 10 % is not, and a baseline figure
 * without a measurement is skipped, not passed. A run's result makes a baseline of all its figures (the
 * same-machine comparison), and the table says whether the RSS was read after a full GC.
 */
import { describe, expect, it } from 'vitest';
import type { ClientsResult, OperationResult } from '../../bench/clients.js';
import {
  baselineFromResult,
  clientsTable,
  compareWithBaseline,
  formatComparison,
  metricValues,
  METRICS,
  readBaseline,
  type Baseline,
} from '../../bench/clients-report.js';

const baseline: Baseline = {
  release: '0.1.0',
  measured: 'a test baseline',
  workers: 1000,
  concurrency: 16,
  figures: [
    {
      pending: 100_000,
      values: {
        'create.concurrent.perSecond': 218,
        'pull.requestWork.p50': 7.4,
        'cycle.requestWork.p99': 123,
        'server.rssMiB': 378,
      },
    },
    { pending: 10_000, values: { 'create.concurrent.perSecond': 203 } },
  ],
};

describe('compareWithBaseline', () => {
  it('names a slower rate and a slower latency, not the faster ones', () => {
    const c = compareWithBaseline(baseline, 100_000, {
      'create.concurrent.perSecond': 180, // 218 / 180 = 1.21 times the time: slower
      'pull.requestWork.p50': 9.0, // 1.22 times: slower
      'cycle.requestWork.p99': 100, // faster
      'server.rssMiB': 300, // smaller
    });
    expect(c.compared?.map((x) => x.key)).toEqual([
      'create.concurrent.perSecond',
      'pull.requestWork.p50',
      'cycle.requestWork.p99',
      'server.rssMiB',
    ]);
    expect(c.slower.map((x) => x.key)).toEqual(['create.concurrent.perSecond', 'pull.requestWork.p50']);
    expect(c.slower[0].ratio).toBeCloseTo(180 / 218);
    expect(c.slower[0].worse).toBeCloseTo(218 / 180);
    const text = formatComparison(c, { workers: 1000 }, baseline);
    expect(text).toContain(
      'slower than 0.1.0 by more than 10 %: createWorkRequest from concurrent clients, requests/s (21 % slower); requestWork one at a time, p50 (22 % slower)',
    );
    expect(text).toContain(
      '| requestWork in cycles from concurrent clients, p99 | 123.0 ms | 100.0 ms | 0.81× | 19 % faster |',
    );
  });

  it('does not name a figure worse by 10 % or less, and says "none"', () => {
    const c = compareWithBaseline(baseline, 100_000, {
      'create.concurrent.perSecond': 200, // 1.09 times the time
      'pull.requestWork.p50': 8.1, // 1.09 times
      'cycle.requestWork.p99': 123,
      'server.rssMiB': 400, // 1.06 times
    });
    expect(c.slower).toEqual([]);
    expect(formatComparison(c, { workers: 1000 }, baseline)).toContain('slower than 0.1.0 by more than 10 %: none');
  });

  it('names a larger RSS as worse', () => {
    const c = compareWithBaseline(baseline, 100_000, { 'server.rssMiB': 500 });
    expect(c.slower.map((x) => x.key)).toEqual(['server.rssMiB']);
    expect(formatComparison(c, { workers: 1000 }, baseline)).toContain('server RSS at the end (32 % larger)');
  });

  it('skips a baseline figure that was not measured, or is no known measurement', () => {
    const withUnknown: Baseline = {
      ...baseline,
      figures: [{ pending: 100_000, values: { ...baseline.figures[0].values, 'no.such.figure': 1 } }],
    };
    const c = compareWithBaseline(withUnknown, 100_000, {
      'create.concurrent.perSecond': 100,
      'pull.requestWork.p50': NaN,
      'server.rssMiB': null,
    });
    expect(c.compared?.map((x) => x.key)).toEqual(['create.concurrent.perSecond']);
    expect(c.slower.map((x) => x.key)).toEqual(['create.concurrent.perSecond']);
    expect(c.skipped).toEqual([
      { key: 'pull.requestWork.p50', reason: 'not measured in this run' },
      { key: 'cycle.requestWork.p99', reason: 'not measured in this run' },
      { key: 'server.rssMiB', reason: 'not measured in this run' },
      { key: 'no.such.figure', reason: 'no such measurement' },
    ]);
    const text = formatComparison(c, { workers: 200 }, baseline);
    expect(text).toContain('this run had 200 workers');
    expect(text).toContain(
      'slower than 0.1.0 by more than 10 %: createWorkRequest from concurrent clients, requests/s (2.18× slower)',
    );
    expect(text).toContain('not compared: pull.requestWork.p50 (not measured in this run)');
  });

  it('compares only at the same queue size', () => {
    const c = compareWithBaseline(baseline, 10_000, {
      'create.concurrent.perSecond': 150,
      'pull.requestWork.p50': 100,
    });
    expect(c.compared?.map((x) => x.key)).toEqual(['create.concurrent.perSecond']);
    expect(c.slower.map((x) => x.key)).toEqual(['create.concurrent.perSecond']);
    const none = compareWithBaseline(baseline, 2_000, { 'create.concurrent.perSecond': 1 });
    expect(none.compared).toBeNull();
    expect(formatComparison(none, { workers: 200 }, baseline)).toBe(
      'Compared with 0.1.0: no 0.1.0 figures at P=2,000.',
    );
  });
});

describe('the checked-in 0.1.0 baseline', () => {
  it('says where its figures come from and names only known measurements', () => {
    const b = readBaseline('0.1.0');
    expect(b.measured).toContain('at release 0.1.0');
    const known = new Set(METRICS.map((m) => m.key));
    const keys = b.figures.flatMap((f) => Object.keys(f.values));
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((k) => !known.has(k))).toEqual([]);
    expect(b.figures.map((f) => f.pending).sort((x, y) => x - y)).toEqual([10_000, 100_000]);
  });
});

/** A result whose latencies are `ms` (p50), twice that (p99), rates `rate` per second, CPU 1 ms per call. */
function result(
  over: { api?: string; ms?: number; rate?: number; afterGc?: boolean; pending?: number } = {},
): ClientsResult {
  const { api = 'current', ms = 10, rate = 100, afterGc = true, pending = 10_000 } = over;
  const spread = { count: 100, p50: ms, p99: 2 * ms, max: 3 * ms };
  const op = (count: number): OperationResult => ({
    count,
    concurrency: 16,
    elapsedMs: (count / rate) * 1000,
    perSecond: rate,
    latency: spread,
    cpuMsPerOp: 1,
  });
  return {
    api,
    workers: 1000,
    pending,
    concurrency: 16,
    setup: {
      registerMs: 1000,
      submission: {
        requests: pending,
        batch: 0,
        elapsedMs: 500,
        perSecond: pending * 2,
        batchMs: { count: 0, p50: NaN, p99: NaN, max: NaN },
      },
      queue: 'copy',
    },
    create: { sequential: op(200), concurrent: op(1000) },
    pull: { requestWork: op(300), start: op(300), complete: op(300), empty: 0 },
    cycle: {
      attempts: 1000,
      cycles: 1000,
      concurrency: 16,
      elapsedMs: 10_000,
      perSecond: rate,
      requestWork: spread,
      start: spread,
      complete: spread,
      cpuMsPerCycle: 3,
    },
    everyWorker: { ...op(1000), empty: 0 },
    server: { rssBytes: 300 * 2 ** 20, heapUsedBytes: afterGc ? 100 * 2 ** 20 : null, afterGc },
    elapsedMs: 60_000,
  };
}

describe('baselineFromResult', () => {
  it('holds every figure of the run at its queue size, and compares a run with it figure by figure', () => {
    const old = result({ api: '0.1.0', ms: 10, rate: 100 });
    const b = baselineFromResult(old, '0.1.0', 'aac64f2, measured on this machine just before');
    expect(b).toMatchObject({ release: '0.1.0', workers: 1000, concurrency: 16 });
    expect(b.figures).toEqual([{ pending: 10_000, values: metricValues(old) }]);
    expect(Object.keys(b.figures[0].values).sort()).toEqual(METRICS.map((m) => m.key).sort());

    const now = result({ ms: 12, rate: 80 }); // every latency 1.2× and every rate 1.25× worse; CPU and RSS the same
    const c = compareWithBaseline(b, now.pending, metricValues(now));
    expect(c.compared).toHaveLength(METRICS.length);
    expect(c.skipped).toEqual([]);
    const slower = new Set(c.slower.map((x) => x.key));
    expect(METRICS.filter((m) => m.unit !== 'MiB' && !m.key.startsWith('cpu.')).every((m) => slower.has(m.key))).toBe(
      true,
    );
    expect([...slower].some((k) => k.startsWith('cpu.') || k === 'server.rssMiB')).toBe(false);
    expect(formatComparison(c, now, b)).toContain(
      'Compared with 0.1.0 at P=10,000 (0.1.0: aac64f2, measured on this machine just before):',
    );
  });

  it('leaves out a figure the run could not measure', () => {
    const old = result();
    old.cycle.cycles = 0; // no cycle got work: its latencies are NaN
    old.cycle.requestWork = { count: 0, p50: NaN, p99: NaN, max: NaN };
    const b = baselineFromResult(old, 'current', 'a run');
    expect(b.figures[0].values).not.toHaveProperty('cycle.requestWork.p50');
    expect(b.figures[0].values).toHaveProperty('cycle.start.p50', 10);
  });
});

describe('clientsTable', () => {
  const rssRow = (text: string) => text.split('\n').find((l) => l.startsWith('| e. server RSS'));

  it('says whether the RSS was read after a full GC: in the label when the columns agree, else in each cell', () => {
    expect(rssRow(clientsTable([{ heading: 'a', result: result() }]))).toBe(
      '| e. server RSS at the end (after a full GC) | 300 MiB |',
    );
    expect(rssRow(clientsTable([{ heading: 'a', result: result({ afterGc: false }) }]))).toBe(
      '| e. server RSS at the end (no GC) | 300 MiB |',
    );
    expect(
      rssRow(
        clientsTable([
          { heading: 'a', result: result({ afterGc: false }) },
          { heading: 'b', result: result() },
        ]),
      ),
    ).toBe('| e. server RSS at the end | 300 MiB (no GC) | 300 MiB (after a full GC) |');
  });

  it('says when the queue was copied in SQL', () => {
    expect(clientsTable([{ heading: 'a', result: result() }])).toContain(
      '| 1.0 s / 500.0 ms (1 created, copied in SQL) |',
    );
  });
});
