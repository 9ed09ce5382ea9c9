/**
 * What the client phase (bench/clients.ts) measured, as figures with names: its markdown table, and
 * its comparison with a release's figures (bench/baselines/<release>.json), which names every
 * figure worse than the release's by more than a threshold (10 %).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { ClientsResult } from './clients.js';
import { formatMs } from './progress.js';

/** One figure of the phase: its unit, which way is better, and where it is in a result. */
export interface Metric {
  readonly key: string;
  readonly label: string;
  readonly unit: 'ms' | '/s' | 'MiB';
  readonly better: 'lower' | 'higher';
  readonly value: (r: ClientsResult) => number;
}

const latency = (key: string, label: string, value: (r: ClientsResult) => number): Metric => ({
  key,
  label,
  unit: 'ms',
  better: 'lower',
  value,
});
const rate = (key: string, label: string, value: (r: ClientsResult) => number): Metric => ({
  key,
  label,
  unit: '/s',
  better: 'higher',
  value,
});

/** Every figure that can be compared, by key (the keys of a baseline file). */
export const METRICS: readonly Metric[] = [
  latency('create.sequential.p50', 'createWorkRequest from 1 client, p50', (r) => r.create.sequential.latency.p50),
  latency('create.sequential.p99', 'createWorkRequest from 1 client, p99', (r) => r.create.sequential.latency.p99),
  rate(
    'create.concurrent.perSecond',
    'createWorkRequest from concurrent clients, requests/s',
    (r) => r.create.concurrent.perSecond,
  ),
  latency(
    'create.concurrent.p50',
    'createWorkRequest from concurrent clients, p50',
    (r) => r.create.concurrent.latency.p50,
  ),
  latency(
    'create.concurrent.p99',
    'createWorkRequest from concurrent clients, p99',
    (r) => r.create.concurrent.latency.p99,
  ),
  latency('pull.requestWork.p50', 'requestWork one at a time, p50', (r) => r.pull.requestWork.latency.p50),
  latency('pull.requestWork.p99', 'requestWork one at a time, p99', (r) => r.pull.requestWork.latency.p99),
  latency('pull.start.p50', 'startWorkRequest one at a time, p50', (r) => r.pull.start.latency.p50),
  latency('pull.start.p99', 'startWorkRequest one at a time, p99', (r) => r.pull.start.latency.p99),
  latency('pull.complete.p50', 'completeWorkRequest one at a time, p50', (r) => r.pull.complete.latency.p50),
  latency('pull.complete.p99', 'completeWorkRequest one at a time, p99', (r) => r.pull.complete.latency.p99),
  rate('cycle.perSecond', 'cycles from concurrent clients, cycles/s', (r) => r.cycle.perSecond),
  latency(
    'cycle.requestWork.p50',
    'requestWork in cycles from concurrent clients, p50',
    (r) => r.cycle.requestWork.p50,
  ),
  latency(
    'cycle.requestWork.p99',
    'requestWork in cycles from concurrent clients, p99',
    (r) => r.cycle.requestWork.p99,
  ),
  latency('cycle.start.p50', 'startWorkRequest in cycles from concurrent clients, p50', (r) => r.cycle.start.p50),
  latency('cycle.start.p99', 'startWorkRequest in cycles from concurrent clients, p99', (r) => r.cycle.start.p99),
  latency(
    'cycle.complete.p50',
    'completeWorkRequest in cycles from concurrent clients, p50',
    (r) => r.cycle.complete.p50,
  ),
  latency(
    'cycle.complete.p99',
    'completeWorkRequest in cycles from concurrent clients, p99',
    (r) => r.cycle.complete.p99,
  ),
  rate('everyWorker.perSecond', 'one requestWork per worker, requests/s', (r) => r.everyWorker.perSecond),
  {
    key: 'server.rssMiB',
    label: 'server RSS at the end',
    unit: 'MiB',
    better: 'lower',
    value: (r) => r.server.rssBytes / 2 ** 20,
  },
  latency(
    'cpu.create.sequential',
    'server CPU per createWorkRequest from 1 client',
    (r) => r.create.sequential.cpuMsPerOp,
  ),
  latency(
    'cpu.create.concurrent',
    'server CPU per createWorkRequest from concurrent clients',
    (r) => r.create.concurrent.cpuMsPerOp,
  ),
  latency('cpu.pull.requestWork', 'server CPU per requestWork one at a time', (r) => r.pull.requestWork.cpuMsPerOp),
  latency('cpu.pull.start', 'server CPU per startWorkRequest one at a time', (r) => r.pull.start.cpuMsPerOp),
  latency('cpu.pull.complete', 'server CPU per completeWorkRequest one at a time', (r) => r.pull.complete.cpuMsPerOp),
  latency('cpu.cycle', 'server CPU per cycle from concurrent clients', (r) => r.cycle.cpuMsPerCycle),
  latency('cpu.everyWorker', 'server CPU per requestWork, one per worker', (r) => r.everyWorker.cpuMsPerOp),
];

/** The value of every metric in a result, by key. */
export function metricValues(r: ClientsResult): Record<string, number> {
  return Object.fromEntries(METRICS.map((m) => [m.key, m.value(r)]));
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const fixed = (n: number) => (n < 10 ? n.toFixed(2) : n.toFixed(1));
/** A metric's value in its unit. */
function format(unit: Metric['unit'], n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  if (unit === 'ms') return formatMs(n);
  if (unit === '/s') return `${int(n)}/s`;
  return `${int(n)} MiB`;
}

const byKey = new Map(METRICS.map((m) => [m.key, m]));
const cell =
  (...keys: string[]) =>
  (r: ClientsResult) =>
    keys.map((k) => format(byKey.get(k)!.unit, byKey.get(k)!.value(r))).join(' / ');

/** Whether the RSS was read after a full GC (a forked server) or as it was (a server read from /proc). */
const gcNote = (r: ClientsResult) => (r.server.afterGc ? 'after a full GC' : 'no GC');

/**
 * The rows of the table: a label, and what one result shows in it. A label may depend on the results
 * shown (`all`): the RSS row says whether it was read after a full GC, in the label when every column
 * agrees, else in each cell.
 */
const ROWS: readonly {
  label: string | ((all: readonly ClientsResult[]) => string);
  cell: (r: ClientsResult, all: readonly ClientsResult[]) => string;
}[] = [
  {
    label: 'setup: workers registered and reported / requests submitted (batches of 1,000)',
    cell: (r) =>
      `${formatMs(r.setup.registerMs)} / ${formatMs(r.setup.submission.elapsedMs)}${r.setup.queue === 'copy' ? ' (1 created, copied in SQL)' : ''}`,
  },
  { label: 'a. createWorkRequest, 1 client: p50 / p99', cell: cell('create.sequential.p50', 'create.sequential.p99') },
  { label: 'a. createWorkRequest, concurrent clients: requests/s', cell: cell('create.concurrent.perSecond') },
  {
    label: 'a. createWorkRequest, concurrent clients: p50 / p99',
    cell: cell('create.concurrent.p50', 'create.concurrent.p99'),
  },
  {
    label: 'b. requestWork one at a time, random workers: p50 / p99',
    cell: cell('pull.requestWork.p50', 'pull.requestWork.p99'),
  },
  { label: 'b. then startWorkRequest: p50 / p99', cell: cell('pull.start.p50', 'pull.start.p99') },
  { label: 'b. then completeWorkRequest: p50 / p99', cell: cell('pull.complete.p50', 'pull.complete.p99') },
  { label: 'c. cycles (requestWork → start → complete), concurrent clients: cycles/s', cell: cell('cycle.perSecond') },
  { label: 'c. requestWork: p50 / p99', cell: cell('cycle.requestWork.p50', 'cycle.requestWork.p99') },
  { label: 'c. startWorkRequest: p50 / p99', cell: cell('cycle.start.p50', 'cycle.start.p99') },
  { label: 'c. completeWorkRequest: p50 / p99', cell: cell('cycle.complete.p50', 'cycle.complete.p99') },
  { label: 'd. one requestWork per worker, concurrent clients: requests/s', cell: cell('everyWorker.perSecond') },
  {
    label: 'requestWork answered without work: b / c / d',
    cell: (r) => `${int(r.pull.empty)} / ${int(r.cycle.attempts - r.cycle.cycles)} / ${int(r.everyWorker.empty)}`,
  },
  {
    label: (all) =>
      new Set(all.map(gcNote)).size === 1 ? `e. server RSS at the end (${gcNote(all[0])})` : 'e. server RSS at the end',
    cell: (r, all) => `${cell('server.rssMiB')(r)}${new Set(all.map(gcNote)).size > 1 ? ` (${gcNote(r)})` : ''}`,
  },
  {
    label: 'e. server CPU per createWorkRequest: 1 client / concurrent',
    cell: cell('cpu.create.sequential', 'cpu.create.concurrent'),
  },
  {
    label: 'e. server CPU per requestWork / start / complete, one at a time',
    cell: cell('cpu.pull.requestWork', 'cpu.pull.start', 'cpu.pull.complete'),
  },
  { label: 'e. server CPU per cycle (c) / per requestWork (d)', cell: cell('cpu.cycle', 'cpu.everyWorker') },
  { label: 'wall clock of the phase', cell: (r) => formatMs(r.elapsedMs) },
];

/** The table "through HTTP clients": one column per result (null: the phase was skipped). */
export function clientsTable(columns: readonly { heading: string; result: ClientsResult | null }[]): string {
  const head = ['measurement', ...columns.map((c) => c.heading)];
  const results = columns.flatMap((c) => (c.result ? [c.result] : []));
  const concurrency = results[0]?.concurrency;
  const label = (row: (typeof ROWS)[number]) => (typeof row.label === 'string' ? row.label : row.label(results));
  return [
    `### through HTTP clients${concurrency ? ` (concurrent parts: ${concurrency} clients at once)` : ''}`,
    '',
    `| ${head.join(' | ')} |`,
    `|---|${columns.map(() => '---:').join('|')}|`,
    ...ROWS.map(
      (row) =>
        `| ${[label(row), ...columns.map((c) => (c.result ? row.cell(c.result, results) : 'skipped'))].join(' | ')} |`,
    ),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// The comparison with a release.

const baselineSchema = z.object({
  release: z.string(),
  measured: z.string(),
  workers: z.number(),
  concurrency: z.number(),
  figures: z.array(z.object({ pending: z.number(), values: z.record(z.string(), z.number()) })),
});
/** A release's figures: per pending-queue size, metric key → value in the metric's unit. */
export type Baseline = z.infer<typeof baselineSchema>;

/** The baseline checked in for `release`. */
export function readBaseline(release = '0.1.0'): Baseline {
  const file = fileURLToPath(new URL(`./baselines/${release}.json`, import.meta.url));
  return baselineSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
}

/**
 * A baseline made of one run's figures, e.g. a release measured on this machine just before the run
 * compared with it: every metric with a finite value, at the run's queue size.
 */
export function baselineFromResult(r: ClientsResult, release: string, measured: string): Baseline {
  const values = Object.fromEntries(Object.entries(metricValues(r)).filter(([, v]) => Number.isFinite(v)));
  return baselineSchema.parse({
    release,
    measured,
    workers: r.workers,
    concurrency: r.concurrency,
    figures: [{ pending: r.pending, values }],
  });
}

/** One figure against the release's. */
export interface Compared {
  key: string;
  label: string;
  unit: Metric['unit'];
  baseline: number;
  measured: number;
  /** measured / baseline. */
  ratio: number;
  /** How many times worse: the ratio for a figure where lower is better, its inverse for a rate. */
  worse: number;
}

export interface Comparison {
  release: string;
  pending: number;
  /** Null when the release has no figures at this size. */
  compared: Compared[] | null;
  /** The figures worse than the release's by more than the threshold. */
  slower: Compared[];
  /** Baseline figures not compared: no such metric, or nothing measured for it. */
  skipped: { key: string; reason: string }[];
  threshold: number;
}

/**
 * Compares what was measured at `pending` (metric key → value) with the release's figures at the
 * same size; only what the baseline has is compared. A figure is named slower when it is worse by
 * more than `threshold` (0.1: a rate below 1/1.1 of the release's, a latency, CPU time or RSS above 1.1 times it).
 */
export function compareWithBaseline(
  baseline: Baseline,
  pending: number,
  measured: Readonly<Record<string, number | null | undefined>>,
  threshold = 0.1,
): Comparison {
  const figures = baseline.figures.find((f) => f.pending === pending);
  const out: Comparison = { release: baseline.release, pending, compared: null, slower: [], skipped: [], threshold };
  if (!figures) return out;
  out.compared = [];
  for (const [key, then] of Object.entries(figures.values)) {
    const metric = byKey.get(key);
    const now = measured[key];
    if (!metric) {
      out.skipped.push({ key, reason: 'no such measurement' });
      continue;
    }
    if (typeof now !== 'number' || !Number.isFinite(now) || !(then > 0)) {
      out.skipped.push({ key, reason: 'not measured in this run' });
      continue;
    }
    const ratio = now / then;
    const compared: Compared = {
      key,
      label: metric.label,
      unit: metric.unit,
      baseline: then,
      measured: now,
      ratio,
      worse: metric.better === 'lower' ? ratio : 1 / ratio,
    };
    out.compared.push(compared);
    if (compared.worse > 1 + threshold) out.slower.push(compared);
  }
  return out;
}

const percent = (n: number) => `${Math.round(n * 100)} %`;
/** How much worse or better, in words: a percentage, or a factor from twice on. */
const change = (c: Compared) => {
  const [worse, better] = c.unit === 'MiB' ? ['larger', 'smaller'] : ['slower', 'faster'];
  if (c.worse >= 2) return `${fixed(c.worse)}× ${worse}`;
  return c.worse >= 1 ? `${percent(c.worse - 1)} ${worse}` : `${percent(1 - c.worse)} ${better}`;
};

/** The comparison in markdown: each figure's ratio, then the list of the slower ones (or "none"). */
export function formatComparison(
  c: Comparison,
  run: { workers: number },
  baseline: Pick<Baseline, 'measured' | 'workers'>,
): string {
  const at = `P=${int(c.pending)}`;
  if (!c.compared) return `Compared with ${c.release}: no ${c.release} figures at ${at}.`;
  const lines = [
    `Compared with ${c.release} at ${at} (${c.release}: ${baseline.measured}${run.workers !== baseline.workers ? `; this run had ${int(run.workers)} workers` : ''}):`,
    '',
    `| measurement | ${c.release} | now | now / ${c.release} | |`,
    '|---|---:|---:|---:|---|',
    ...c.compared.map(
      (x) =>
        `| ${x.label} | ${format(x.unit, x.baseline)} | ${format(x.unit, x.measured)} | ${fixed(x.ratio)}× | ${change(x)}${c.slower.includes(x) ? ' ❌' : ''} |`,
    ),
    '',
    `slower than ${c.release} by more than ${percent(c.threshold)}: ${c.slower.length ? c.slower.map((x) => `${x.label} (${change(x)})`).join('; ') : 'none'}`,
  ];
  if (c.skipped.length) lines.push(`not compared: ${c.skipped.map((s) => `${s.key} (${s.reason})`).join('; ')}`);
  return lines.join('\n');
}
