/**
 * `npm run bench`: the benchmark of the scheduler (docs/design.md: quality bars). For each size it runs three child
 * processes (load, new scheduler, old walk; see bench/stages.ts), then the client phase (bench/clients.ts:
 * `bench/ws.ts --only clients` in a child process, on a server process and a database of its own,
 * `<db-name>_clients`), and then prints the markdown tables on stdout, with the client phase's comparison
 * with the 0.1.0 figures (bench/baselines/0.1.0.json). Progress goes to stderr.
 *
 *   npm run bench                                 default sizes 1000x10000, 1000x100000, 10000x1000000
 *   npm run bench -- --sizes 1000x100000          workers x pending requests, comma-separated
 *   npm run bench -- --quick                      a small smoke run (under a minute)
 *   npm run bench -- --reuse                      measure the database a previous run loaded, when it holds the same workload
 *   npm run bench -- --no-clients                 without the client phase
 *
 * Environment (flags win): BENCH_SIZES, BENCH_DATABASE_URL (a server URL; the database
 * `tagsched_bench` on it is dropped and recreated), BENCH_OLD_CAP_SECONDS, BENCH_SEED.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import pg from 'pg';
import { withDatabase } from './load.js';
import { formatMs } from './progress.js';
import type { ClientsResult } from './clients.js';
import { clientsSection, markdownTable, type SizeResult } from './report.js';
import { loadStage, newStage, oldStage, type StageOptions } from './stages.js';

const DEFAULT_SIZES = '1000x10000,1000x100000,10000x1000000';
const QUICK_SIZES = '200x2000';
const STAGES = ['load', 'new', 'old'] as const;
type Stage = (typeof STAGES)[number];

interface Options {
  sizes: string;
  quick: boolean;
  calls: number;
  runs: number;
  oldCapSeconds: number;
  old: boolean;
  clients: boolean;
  history: number;
  sharedResources: boolean;
  seed: number;
  databaseUrl: string;
  dbName: string;
  reuse: boolean;
  json?: string;
  stage?: Stage;
  size?: string;
  out?: string;
}

const positiveInt = (raw: string) => {
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError('expected a positive integer');
  return n;
};

const nonNegative = (raw: string) => {
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('expected a number ≥ 0');
  return n;
};

function parseSizes(raw: string): { workers: number; requests: number }[] {
  return raw.split(',').map((part) => {
    const m = /^\s*(\d+)\s*x\s*(\d+)\s*$/.exec(part);
    if (!m) throw new InvalidArgumentError(`"${part}" is not WORKERSxREQUESTS (e.g. 1000x100000)`);
    return { workers: Number(m[1]), requests: Number(m[2]) };
  });
}

function stageOptions(o: Options, size: { workers: number; requests: number }): StageOptions {
  return {
    ...size,
    seed: o.seed,
    serverUrl: o.databaseUrl,
    dbName: o.dbName,
    calls: o.calls,
    runs: o.runs,
    oldCapMs: o.oldCapSeconds * 1000,
    history: o.history,
    sharedResources: o.sharedResources,
  };
}

/** Runs one stage in a child process (its own memory peak) and reads back its result. */
async function runChild(o: Options, stage: Stage, size: string, dir: string): Promise<{ result: unknown; ms: number }> {
  const out = path.join(dir, `${stage}-${size}.json`);
  const self = fileURLToPath(import.meta.url);
  const args = [
    ...process.execArgv,
    self,
    '--stage',
    stage,
    '--size',
    size,
    '--out',
    out,
    '--calls',
    String(o.calls),
    '--runs',
    String(o.runs),
  ];
  args.push(
    '--old-cap-seconds',
    String(o.oldCapSeconds),
    '--seed',
    String(o.seed),
    '--database-url',
    o.databaseUrl,
    '--db-name',
    o.dbName,
    '--history',
    String(o.history),
    ...(o.sharedResources ? ['--shared-resources'] : []),
  );
  const started = performance.now();
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', resolve);
  });
  if (code !== 0) throw new Error(`the ${stage} stage of ${size} failed (exit code ${code})`);
  return { result: JSON.parse(readFileSync(out, 'utf8')), ms: performance.now() - started };
}

/**
 * The client phase at this size in a child process (`bench/ws.ts --only clients`, W workers and P
 * pending requests), on the database `<db-name>_clients`; its stdout (the phase's own table) goes to stderr.
 */
async function runClients(
  o: Options,
  size: { workers: number; requests: number },
  dir: string,
): Promise<{ result: ClientsResult; ms: number }> {
  const out = path.join(dir, `clients-${size.workers}x${size.requests}.json`);
  const ws = fileURLToPath(new URL('./ws.ts', import.meta.url));
  const args = [
    ...process.execArgv,
    ws,
    '--only',
    'clients',
    '--workers',
    String(size.workers),
    '--clients-pending',
    String(size.requests),
  ];
  args.push(
    '--db-name',
    `${o.dbName}_clients`,
    '--seed',
    String(o.seed),
    '--clients-scale',
    o.quick ? '0.2' : '1',
    '--json',
    out,
  );
  const started = performance.now();
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', process.stderr, 'inherit'],
      env: { ...process.env, BENCH_DATABASE_URL: o.databaseUrl },
    });
    child.on('error', reject);
    child.on('exit', resolve);
  });
  if (code !== 0) throw new Error(`the client phase of ${size.workers}x${size.requests} failed (exit code ${code})`);
  const { clients } = JSON.parse(readFileSync(out, 'utf8')) as { clients: ClientsResult };
  return { result: clients, ms: performance.now() - started };
}

/** What a loaded database holds, written on it (COMMENT ON DATABASE) so that `--reuse` can tell whether it fits. */
const workloadMark = (o: Options, label: string) =>
  JSON.stringify({
    tagschedBench: 1,
    size: label,
    seed: o.seed,
    history: o.history,
    ...(o.sharedResources ? { sharedResources: true } : {}),
  });

async function withServer<T>(o: Options, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: o.databaseUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * With `--reuse`: the load result of a database loaded earlier with this workload (size, seed,
 * history), vacuumed and analysed again so that it starts as a fresh load does (the previous run's
 * passes put rows back and left the visibility map stale); null when there is none that fits.
 */
async function reusable(o: Options, label: string): Promise<{ result: unknown; ms: number } | null> {
  const comment = await withServer(o, async (c) => {
    const { rows } = await c.query<{ comment: string | null }>(
      `select shobj_description(oid, 'pg_database') as comment from pg_database where datname = $1`,
      [o.dbName],
    );
    return rows[0]?.comment ?? null;
  });
  let stored: { mark?: string; load?: unknown } | null = null;
  try {
    stored = comment ? (JSON.parse(comment) as { mark?: string; load?: unknown }) : null;
  } catch {
    return null; // someone else's comment: not a database this bench loaded
  }
  if (stored?.mark !== workloadMark(o, label)) return null;
  const started = performance.now();
  const client = new pg.Client({ connectionString: withDatabase(o.databaseUrl, o.dbName) });
  await client.connect();
  try {
    await client.query('vacuum analyze');
  } finally {
    await client.end();
  }
  process.stderr.write(
    `  reusing the loaded database ${o.dbName} (vacuumed in ${formatMs(performance.now() - started)})\n`,
  );
  return { result: stored.load, ms: 0 };
}

async function markLoaded(o: Options, label: string, load: unknown): Promise<void> {
  const comment = JSON.stringify({ mark: workloadMark(o, label), load }).replaceAll("'", "''");
  await withServer(o, (c) => c.query(`comment on database "${o.dbName}" is '${comment}'`));
}

async function parent(o: Options): Promise<void> {
  const sizes = parseSizes(o.quick && o.sizes === DEFAULT_SIZES ? QUICK_SIZES : o.sizes);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tagsched-bench-'));
  const results: SizeResult[] = [];
  try {
    for (const size of sizes) {
      const label = `${size.workers}x${size.requests}`;
      process.stderr.write(
        `\nW=${size.workers.toLocaleString('en-US')} workers, P=${size.requests.toLocaleString('en-US')} pending requests\n`,
      );
      const reused = o.reuse ? await reusable(o, label) : null;
      const load = reused ?? (await runChild(o, 'load', label, dir));
      if (!reused) await markLoaded(o, label, load.result);
      const fresh = await runChild(o, 'new', label, dir);
      const old = o.old ? await runChild(o, 'old', label, dir) : null;
      const clients = o.clients ? await runClients(o, size, dir) : null;
      results.push({
        ...size,
        load: load.result as SizeResult['load'],
        new: fresh.result as SizeResult['new'],
        old: (old?.result ?? null) as SizeResult['old'],
        clients: clients?.result ?? null,
        stageMs: { load: load.ms, new: fresh.ms, old: old?.ms ?? 0, clients: clients?.ms ?? 0 },
      });
      process.stderr.write(`  size done in ${formatMs(load.ms + fresh.ms + (old?.ms ?? 0) + (clients?.ms ?? 0))}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const host = `${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, load average ${os.loadavg()[0].toFixed(1)} at the end, Node ${process.version}`;
  process.stdout.write(
    `\n${markdownTable(results, { ...stageOptions(o, sizes[0]), oldCapMs: o.oldCapSeconds * 1000 })}\n`,
  );
  if (o.clients) process.stdout.write(`\n${clientsSection(results)}\n`);
  process.stdout.write(`\nMachine: ${host}.\n`);
  if (o.json) writeFileSync(o.json, JSON.stringify({ options: o, results }, null, 2));
}

async function child(o: Options): Promise<void> {
  const [size] = parseSizes(o.size ?? '');
  const so = stageOptions(o, size);
  const result = o.stage === 'load' ? await loadStage(so) : o.stage === 'new' ? await newStage(so) : await oldStage(so);
  writeFileSync(o.out!, JSON.stringify(result));
}

const program = new Command('bench')
  .description('Benchmark of the scheduler against the per-pair walk it replaces (docs/design.md: quality bars)')
  .option('--sizes <list>', 'comma-separated WORKERSxREQUESTS', process.env.BENCH_SIZES || DEFAULT_SIZES)
  .option('--quick', 'a small smoke run: 200 workers, 2,000 requests, short budgets', false)
  .option('--calls <n>', 'next-work calls per round', positiveInt, 500)
  .option('--runs <n>', 'runs of each GraphQL operation', positiveInt, 5)
  .option(
    '--old-cap-seconds <n>',
    'wall-clock budget of each old-walk operation',
    positiveInt,
    Number(process.env.BENCH_OLD_CAP_SECONDS) || 60,
  )
  .option('--no-old', 'skip the old per-pair walk')
  .option('--no-clients', 'skip the client phase (bench/clients.ts) and its comparison with 0.1.0')
  .option(
    '--history <ratio>',
    'completed requests in the history per pending request (spread over the last 30 days)',
    nonNegative,
    1,
  )
  .option('--shared-resources', 'half the workers share their resources and every pending request reserves some', false)
  .option('--seed <n>', 'workload seed', positiveInt, Number(process.env.BENCH_SEED) || 20261121)
  .option(
    '--database-url <url>',
    'a PostgreSQL server URL (any database on it)',
    process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres',
  )
  .option('--db-name <name>', 'the database to drop, recreate and load', 'tagsched_bench')
  .option(
    '--reuse',
    'measure the database --db-name as a previous run loaded it, when it holds the same workload (size, seed, history); load it otherwise',
    false,
  )
  .option('--json <file>', 'also write every measurement as JSON')
  .addOption(
    new Command()
      .createOption('--stage <stage>', 'internal: run one stage')
      .choices([...STAGES])
      .hideHelp(),
  )
  .addOption(new Command().createOption('--size <size>', 'internal').hideHelp())
  .addOption(new Command().createOption('--out <file>', 'internal').hideHelp())
  .parse();

const options = program.opts<Options>();
if (options.quick) {
  if (options.calls === 500) options.calls = 100;
  if (options.runs === 5) options.runs = 3;
  if (options.oldCapSeconds === 60) options.oldCapSeconds = 5;
}
if (!/^[a-z_][a-z0-9_]*$/.test(options.dbName))
  throw new Error(`--db-name must be a plain identifier, got "${options.dbName}"`);
await (options.stage ? child(options) : parent(options));
