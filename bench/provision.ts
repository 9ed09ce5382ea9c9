/**
 * `npm run bench:provision`: how long a request waits for a machine when its pool has none, with
 * the local provider on this machine: from the request becoming PENDING in an empty pool to its
 * agent starting it (docs/design.md: pools and instances). A real server process (src/server.ts) on a fresh database runs
 * the provisioner; each round creates one noop request for an empty local pool, waits until it
 * COMPLETED, then until the instance was stopped again (idle timeout 1 s), so that every round
 * starts from zero. The time is split with the server's own timestamps:
 *   ① PENDING → launch recorded (the provisioner's debounce and cycle: demand, decision)
 *   ② launch recorded → worker connected (a Node process starts, activates, connects)
 *   ③ connected → assigned (its metadata report, then the scheduler)
 *   ④ assigned → started (the push to the agent and its acknowledgement)
 *
 *   npm run bench:provision -- --rounds 10 --debounce-ms 1000 --db-name tagsched_bench_provision
 *
 * BENCH_DATABASE_URL (default postgres://root@127.0.0.1:5432/postgres) names the PostgreSQL server;
 * the database is dropped and recreated, and dropped again at the end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { formatMs } from './progress.js';

const ADMIN = 'tsk_admin_bench-provision-0123456789abcdef';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    'debounce-ms': { type: 'string', default: '1000' },
    'db-name': { type: 'string', default: 'tagsched_bench_provision' },
  },
});
const rounds = Number(values.rounds);
const dbName = values['db-name']!;
if (!/^[a-z_][a-z0-9_]*$/.test(dbName)) throw new Error(`--db-name must be a plain identifier, got "${dbName}"`);
const serverUrl = process.env.BENCH_DATABASE_URL || 'postgres://root@127.0.0.1:5432/postgres';
const dbUrl = (() => {
  const u = new URL(serverUrl);
  u.pathname = `/${dbName}`;
  return u.toString();
})();

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

function startServer(dataDir: string): Promise<{ url: string; child: ChildProcess }> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  Object.assign(env, {
    DATABASE_URL: dbUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    TAGSCHED_DATA_DIR: dataDir,
    TAGSCHED_ADMIN_TOKEN: ADMIN,
    TAGSCHED_SECRET_KEY: 'bench-provision',
    TAGSCHED_PROVISIONER_INTERVAL_SECONDS: '1',
    TAGSCHED_PROVISIONER_DEBOUNCE_MS: values['debounce-ms']!,
    NODE_ENV: 'production',
    LOG_LEVEL: 'info',
  });
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('src/server.ts')], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const early = (code: number | null) => reject(new Error(`the server exited with ${code}`));
    child.once('exit', early);
    const onData = (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.includes('tagsched is listening'));
      if (!line) return;
      child.off('exit', early);
      child.stdout!.off('data', onData);
      child.stdout!.resume(); // keep draining its log
      resolve({ url: (JSON.parse(line) as { url: string }).url, child });
    };
    child.stdout!.on('data', onData);
  });
}

async function gql(url: string, query: string): Promise<Record<string, any>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
    body: JSON.stringify({ query }),
  });
  const body = (await res.json()) as { data?: Record<string, any>; errors?: unknown };
  if (!body.data || body.errors) throw new Error(JSON.stringify(body));
  return body.data;
}

async function until<T>(
  what: string,
  fn: () => Promise<T | null | false | undefined>,
  timeoutMs = 120_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(0.9 * xs.length) - 1)];

await admin(`drop database if exists "${dbName}" with (force)`);
await admin(`create database "${dbName}"`);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-bench-provision-'));
const { url, child } = await startServer(dataDir);
const db = new pg.Client({ connectionString: dbUrl });
await db.connect();
const phases: number[][] = [[], [], [], [], []];
try {
  await gql(url, `mutation { createWorkspace(input: { name: "bench/main" }) { __typename } }`);
  await gql(
    url,
    `mutation { createWorkerPool(input: { name: "bench-local", maxActiveInstances: 1, idleTimeoutSeconds: 1 }) { __typename } }`,
  );
  for (let round = 0; round < rounds; round++) {
    await until(
      'an empty pool',
      async () =>
        (await db.query(`select count(*)::int as n from instance where state <> 'TERMINATED' and state <> 'FAILED'`))
          .rows[0].n === 0,
    );
    const created = await gql(
      url,
      `mutation { createWorkRequest(input: { workspace: "bench/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
    );
    const id = Number(created.createWorkRequest.id);
    const row = await until('the request to complete', async () => {
      const r = (
        await db.query(
          `select extract(epoch from w.pending_at) * 1000 as pending, extract(epoch from i.requested_at) * 1000 as launched,
                  extract(epoch from i.started_at) * 1000 as connected, extract(epoch from w.assigned_at) * 1000 as assigned,
                  extract(epoch from w.started_at) * 1000 as started, w.status
             from work_request w join worker k on k.id = w.worker_id join instance i on i.worker_id = k.id where w.id = $1`,
          [id],
        )
      ).rows[0] as Record<string, string> | undefined;
      return r?.status === 'COMPLETED' && r;
    });
    const [pending, launched, connected, assigned, started] = [
      'pending',
      'launched',
      'connected',
      'assigned',
      'started',
    ].map((k) => Number(row[k]));
    const split = [
      launched - pending,
      connected - launched,
      assigned - connected,
      started - assigned,
      started - pending,
    ];
    split.forEach((ms, i) => phases[i].push(ms));
    process.stderr.write(
      `round ${round + 1}/${rounds}: ${formatMs(split[4])} (${split.slice(0, 4).map(formatMs).join(' + ')})\n`,
    );
  }
} finally {
  await db.end();
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
  await admin(`drop database if exists "${dbName}" with (force)`);
  fs.rmSync(dataDir, { recursive: true, force: true });
}
const labels = [
  '① PENDING → launch recorded',
  '② launch recorded → worker connected',
  '③ connected → assigned',
  '④ assigned → started',
  'PENDING → started by its agent',
];
process.stdout.write(
  `\n| phase (${rounds} rounds, debounce ${values['debounce-ms']} ms) | median | p90 | max |\n|---|---:|---:|---:|\n`,
);
labels.forEach((label, i) =>
  process.stdout.write(
    `| ${label} | ${formatMs(median(phases[i]))} | ${formatMs(p90(phases[i]))} | ${formatMs(Math.max(...phases[i]))} |\n`,
  ),
);
process.stdout.write(
  `\nMachine: ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'cpu'}, load average ${os.loadavg()[0].toFixed(1)} at the end, Node ${process.version}.\n`,
);
