/**
 * The markdown table of a benchmark run: one column per size, one row per measurement, with the
 * docs/design.md: quality bars target beside the rows that have one, and the old walk's ratios.
 */
import type { ClientsResult } from './clients.js';
import { clientsTable, compareWithBaseline, formatComparison, metricValues, readBaseline } from './clients-report.js';
import { formatMs } from './progress.js';
import type { LoadResult, NewResult, OldResult, StageOptions } from './stages.js';

/** Everything measured for one size. */
export interface SizeResult {
  readonly workers: number;
  readonly requests: number;
  readonly load: LoadResult;
  readonly new: NewResult;
  readonly old: OldResult | null;
  /** The client phase (bench/clients.ts); null when skipped. */
  readonly clients: ClientsResult | null;
  /** Wall-clock time of each stage, in milliseconds. */
  readonly stageMs: { load: number; new: number; old: number; clients: number };
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const mib = (bytes: number) => `${int(bytes / 2 ** 20)} MiB`;
const times = (r: number) => (r < 10 ? `${r.toFixed(1)}×` : `${int(r)}×`);
const ratio = (oldMs: number, newMs: number) => (Number.isFinite(oldMs) && newMs > 0 ? times(oldMs / newMs) : 'n/a');
const approx = (extrapolated: boolean) => (extrapolated ? '~' : '');
/** The median of the passes after the first one. */
const warmPass = (r: SizeResult) =>
  [...r.new.pass.warm].sort((a, b) => a.ms - b.ms)[Math.floor((r.new.pass.warm.length - 1) / 2)];
const passRate = (run: { assignments: number; ms: number }) => (run.assignments * 1000) / run.ms;

interface Row {
  readonly label: string;
  readonly target: string;
  readonly cell: (r: SizeResult) => string;
}

const ROWS: Row[] = [
  {
    label: 'load: generate + insert, index, vacuum',
    target: '',
    cell: (r) => `${formatMs(r.load.generateMs)} + ${formatMs(r.load.loadMs)}`,
  },
  {
    label: 'request variants → task classes',
    target: '',
    cell: (r) => `${int(r.load.variants)} → ${int(r.load.classes)}`,
  },
  { label: 'history: completed requests (last 30 days)', target: '', cell: (r) => int(r.load.history ?? 0) },
  {
    label: 'next work, first call per worker: p50 / p99',
    target: '',
    cell: (r) => `${formatMs(r.new.nextWork.cold.p50)} / ${formatMs(r.new.nextWork.cold.p99)}`,
  },
  {
    label: 'next work, repeated calls: p50 / p99',
    target: 'p99 ≤ 5 ms (W=10k, P=1M)',
    cell: (r) => `${formatMs(r.new.nextWork.warm.p50)} / ${formatMs(r.new.nextWork.warm.p99)}`,
  },
  {
    label: 'floor: a transaction locking one row, p50 / p99',
    target: '',
    cell: (r) => `${formatMs(r.new.nextWork.floor.p50)} / ${formatMs(r.new.nextWork.floor.p99)}`,
  },
  {
    label: 'next work, calls that found work',
    target: '',
    cell: (r) => `${Math.round(r.new.nextWork.hitRate * 100)}% of ${int(r.new.nextWork.warm.n * 2)}`,
  },
  {
    label: 'old walk: next work, p50',
    target: '',
    cell: (r) =>
      r.old
        ? `${approx(r.old.nextWork.extrapolated)}${formatMs(r.old.nextWork.ms)}${r.old.nextWork.runs ? ` (${r.old.nextWork.runs} calls)` : ''}`
        : 'skipped',
  },
  {
    label: 'next work: old p50 / new p50',
    target: '≥ 100× (P=100k)',
    cell: (r) =>
      r.old ? `${approx(r.old.nextWork.extrapolated)}${ratio(r.old.nextWork.ms, r.new.nextWork.warm.p50)}` : '',
  },
  {
    label: 'full pass, fresh cache: assignments in time (rate)',
    target: '',
    cell: (r) =>
      `${int(r.new.pass.cold.assignments)} in ${formatMs(r.new.pass.cold.ms)} (${int(passRate(r.new.pass.cold))}/s)`,
  },
  {
    label: 'full pass, warm cache: assignments in time (rate)',
    target: '≥ 2,000/s',
    cell: (r) => `${int(warmPass(r).assignments)} in ${formatMs(warmPass(r).ms)} (${int(passRate(warmPass(r)))}/s)`,
  },
  {
    label: 'old walk: full pass rate (walks within the budget)',
    target: '',
    cell: (r) =>
      r.old
        ? `${approx(r.old.pass.extrapolated)}${r.old.pass.perSecond.toFixed(2)}/s (${r.old.pass.walks} walks)`
        : 'skipped',
  },
  {
    label: 'full pass: new rate / old rate',
    target: '',
    cell: (r) =>
      r.old ? `${approx(r.old.pass.extrapolated)}${times(passRate(warmPass(r)) / r.old.pass.perSecond)}` : '',
  },
  {
    label: 'candidates of 1,000 requests (GraphQL), first call of the process',
    target: '',
    cell: (r) => formatMs(r.new.candidates.firstMs),
  },
  {
    label: 'candidates of 1,000 requests (GraphQL), p50 after it',
    target: '≤ 100 ms',
    cell: (r) => `${formatMs(r.new.candidates.latency.p50)} (${int(r.new.candidates.averageCandidates)} per request)`,
  },
  {
    label: 'old walk: candidates of 1,000 requests',
    target: '',
    cell: (r) => (r.old ? `${approx(r.old.candidates.extrapolated)}${formatMs(r.old.candidates.ms)}` : 'skipped'),
  },
  {
    label: 'candidates: old / new',
    target: '',
    cell: (r) =>
      r.old
        ? `${approx(r.old.candidates.extrapolated)}${ratio(r.old.candidates.ms, r.new.candidates.latency.p50)}`
        : '',
  },
  {
    label: 'provisioning demand, 10 pools (GraphQL), first call / p50 after it',
    target: '≤ 1 s (P=1M)',
    cell: (r) => `${formatMs(r.new.demand.firstMs)} / ${formatMs(r.new.demand.latency.p50)}`,
  },
  {
    label: 'old walk: demand of 10 pools',
    target: '',
    cell: (r) => (r.old ? `${approx(r.old.demand.extrapolated)}${formatMs(r.old.demand.ms)}` : 'skipped'),
  },
  {
    label: 'demand: old / new',
    target: '',
    cell: (r) =>
      r.old ? `${approx(r.old.demand.extrapolated)}${ratio(r.old.demand.ms, r.new.demand.latency.p50)}` : '',
  },
  {
    label: 'provisioner cycle, 10 pools: demand + decisions (no provider call), first / p50 after it',
    target: '≤ 1 s (P=1M)',
    cell: (r) =>
      r.new.cycle
        ? `${formatMs(r.new.cycle.firstMs)} / ${formatMs(r.new.cycle.latency.p50)} (${int(r.new.cycle.launches)} launches, ${int(r.new.cycle.stops)} stops)`
        : 'n/a',
  },
  {
    label: 'peak RSS / heap, scheduler process',
    target: '',
    cell: (r) => `${mib(r.new.memory.maxRssBytes)} / ${mib(r.new.memory.heapUsedBytes)}`,
  },
  { label: 'peak RSS, old-walk process', target: '', cell: (r) => (r.old ? mib(r.old.memory.maxRssBytes) : '') },
  {
    label: 'wall clock: load / new / old stages / client phase',
    target: '',
    cell: (r) =>
      `${formatMs(r.stageMs.load)} / ${formatMs(r.stageMs.new)} / ${formatMs(r.stageMs.old)} / ${formatMs(r.stageMs.clients)}`,
  },
];

/** The table, in markdown. */
export function markdownTable(
  results: readonly SizeResult[],
  o: Pick<StageOptions, 'calls' | 'runs' | 'oldCapMs' | 'seed'>,
): string {
  const head = ['measurement', 'target', ...results.map((r) => `W=${int(r.workers)}, P=${int(r.requests)}`)];
  const lines = [
    `| ${head.join(' | ')} |`,
    `|${head.map((_, i) => (i < 2 ? '---' : '---:')).join('|')}|`,
    ...ROWS.map((row) => `| ${[row.label, row.target, ...results.map(row.cell)].join(' | ')} |`),
  ];
  const notes = [
    '',
    `Seed ${o.seed}; next work: ${o.calls} calls per round on random workers, each its own committed transaction; GraphQL operations: p50 of ${o.runs} runs after a first one;`,
    `old walk: each operation within ${formatMs(o.oldCapMs)}, "~" = extrapolated linearly from the part it walked in that time.`,
  ];
  return [...lines, ...notes].join('\n');
}

/** The client phase's table (one column per size), then each size's comparison with the 0.1.0 figures. */
export function clientsSection(results: readonly SizeResult[]): string {
  const baseline = readBaseline('0.1.0');
  const table = clientsTable(
    results.map((r) => ({ heading: `W=${int(r.workers)}, P=${int(r.requests)}`, result: r.clients })),
  );
  const comparisons = results.flatMap((r) =>
    r.clients
      ? [
          formatComparison(
            compareWithBaseline(baseline, r.clients.pending, metricValues(r.clients)),
            r.clients,
            baseline,
          ),
        ]
      : [],
  );
  return [table, ...comparisons].join('\n\n');
}
