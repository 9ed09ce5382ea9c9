/**
 * The three stages of one benchmark size, each run in its own process by bench/run.ts so that each
 * reports its own peak memory: `load` generates and loads the workload, `new` measures the
 * scheduler as it is, `old` measures the per-pair walk on the same data. They share nothing but
 * the database and the seed.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { MikroORM } from '@mikro-orm/postgresql';
import { buildApp } from '../src/server/app.js';
import { loadConfig } from '../src/core/config/config.js';
import { createLogger } from '../src/core/log.js';
import { createOrm } from '../src/storage/orm.js';
import { poolTagInput } from '../src/scheduler/storage/pool-templates.js';
import { computePoolTemplateTags } from '../src/core/tags/worker-tags.js';
import { loadWorkload, withDatabase } from './load.js';
import {
  measureCandidates,
  measureDemand,
  measureNextWork,
  measurePass,
  measureProvisionerCycle,
  latencies,
  type CandidatesResult,
  type CycleResult,
  type DemandResult,
  type Latencies,
  type NextWorkResult,
  type PassResult,
} from './measure.js';
import { fullDuration, oldCandidates, oldDemand, oldNextForWorker, oldPass, poolAsMetadata } from './old-walk.js';
import { phase } from './progress.js';
import { Random } from './prng.js';
import { generateWorkload } from './workload.js';

/** What every stage is told. */
export interface StageOptions {
  readonly workers: number;
  readonly requests: number;
  readonly seed: number;
  readonly serverUrl: string;
  readonly dbName: string;
  /** Calls of next work per round. */
  readonly calls: number;
  /** Runs of the GraphQL operations (candidates, demand) and of the pass. */
  readonly runs: number;
  /** Wall-clock budget of each old-walk operation, in milliseconds. */
  readonly oldCapMs: number;
  /** Completed requests in the history per pending request. */
  readonly history: number;
  /** Half the workers share their resources, and every pending request reserves some (load.ts: shareResources). */
  readonly sharedResources?: boolean;
}

/** Peak memory of a stage's process. */
export interface Memory {
  readonly maxRssBytes: number;
  readonly heapUsedBytes: number;
}

const memory = (): Memory => ({
  maxRssBytes: process.resourceUsage().maxRSS * 1024,
  heapUsedBytes: process.memoryUsage().heapUsed,
});

/** What the load stage reports. */
export interface LoadResult {
  readonly generateMs: number;
  readonly loadMs: number;
  readonly timings: Record<string, number>;
  readonly variants: number;
  readonly classes: number;
  /** Completed requests loaded as history. */
  readonly history: number;
  readonly memory: Memory;
}

/** Generates the workload and loads it into a fresh database. */
export async function loadStage(o: StageOptions): Promise<LoadResult> {
  const p = phase('generate workload');
  const workload = generateWorkload({ workers: o.workers, requests: o.requests }, o.seed);
  const generateMs = p.end(`${workload.variants.length} request variants`);
  const started = performance.now();
  const db = await loadWorkload(workload, o.serverUrl, o.dbName, {
    history: o.history,
    sharedResources: o.sharedResources,
  });
  const loadMs = performance.now() - started;
  await db.orm.close(true);
  return {
    generateMs,
    loadMs,
    timings: db.timings,
    variants: workload.variants.length,
    classes: db.classCount,
    history: db.historyRows,
    memory: memory(),
  };
}

/** What the new-scheduler stage reports. */
export interface NewResult {
  readonly nextWork: NextWorkResult;
  readonly pass: PassResult;
  readonly candidates: CandidatesResult;
  readonly demand: DemandResult;
  /** Absent in results recorded before the provisioner existed. */
  readonly cycle?: CycleResult;
  readonly memory: Memory;
}

interface Facts {
  readonly workerIds: number[];
  /** One entry per free slot of each worker that takes worker tasks, in id order. */
  readonly slots: number[];
  readonly pending: number;
  readonly candidateIds: number[];
}

/** Keeps every worker fresh (a size's stages can outlast the freshness window) and reads what the stages need. */
async function facts(orm: MikroORM, o: StageOptions): Promise<Facts> {
  const conn = orm.em.fork().getConnection();
  // Workers stay fresh for 65 minutes; rewriting every row at each stage would only bloat the table.
  await conn.execute(
    `update worker set last_seen_at = now(), metadata_reported_at = now() where metadata_reported_at < now() - interval '20 minutes'`,
  );
  const workers = await conn.execute<{ id: number; type: string; concurrency: number }[]>(
    `select id, type, concurrency from worker order by id`,
  );
  const [{ first, pending }] = await conn.execute<{ first: number; pending: number }[]>(
    `select min(id)::int as first, count(*)::int as pending from work_request where status = 'PENDING'`,
  );
  const random = new Random(o.seed ^ 0xca4d);
  const candidateIds = [
    ...new Set(Array.from({ length: Math.min(1000, pending) * 2 }, () => first + random.int(0, pending - 1))),
  ].slice(0, Math.min(1000, pending));
  return {
    workerIds: workers.map((w) => w.id),
    slots: workers.filter((w) => w.type === 'worker').flatMap((w) => Array.from({ length: w.concurrency }, () => w.id)),
    pending,
    candidateIds,
  };
}

/** Measures the scheduler as it is: its own functions for next work and the pass, the GraphQL app for the rest. */
export async function newStage(o: StageOptions): Promise<NewResult> {
  const url = withDatabase(o.serverUrl, o.dbName);
  const adminToken = `tsk_admin_bench_${randomBytes(16).toString('hex')}`;
  const config = loadConfig(
    // The bench measures the scheduler, not the operation limits: the candidates of 1,000 requests
    // cost more than a client may ask for by default (TAGSCHED_MAX_COST).
    { TAGSCHED_MAX_COST: String(10_000_000) },
    {
      server: {
        databaseUrl: url,
        adminToken,
        // One key per bench database, the same on every run: `--reuse` measures a database an earlier run
        // sealed its pool accounts in. It guards nothing but the bench's own made-up accounts.
        secretKey: `tagsched-bench-${o.dbName}`,
        dataDir: path.join(os.tmpdir(), 'tagsched-bench'),
        logLevel: 'silent',
      },
      scheduler: { automatic: false },
    },
  );
  const app = await buildApp(config, { log: createLogger('silent') });
  try {
    const f = await facts(app.orm, o);
    const random = new Random(o.seed ^ 0x4e58);
    const nextWork = await measureNextWork(app.orm, config, f.workerIds, o.calls, random);
    const candidates = await measureCandidates(app, adminToken, f.candidateIds, o.runs);
    const demand = await measureDemand(app, adminToken, o.runs);
    const cycle = await measureProvisionerCycle(app, o.runs);
    const pass = await measurePass(app.orm, config, Math.max(2, Math.min(o.runs, 3)));
    return { nextWork, pass, candidates, demand, cycle, memory: memory() };
  } finally {
    await app.stop();
  }
}

/** An old-walk measurement: measured when it completed within the budget, extrapolated otherwise. */
export interface OldMeasure {
  readonly ms: number;
  readonly extrapolated: boolean;
  /** Complete runs measured (0 when extrapolated from a partial one). */
  readonly runs: number;
}

/** What the old-walk stage reports. */
export interface OldResult {
  readonly nextWork: OldMeasure;
  readonly pass: {
    readonly perSecond: number;
    readonly assignments: number;
    readonly walks: number;
    readonly extrapolated: boolean;
  };
  readonly candidates: OldMeasure;
  readonly demand: OldMeasure;
  readonly memory: Memory;
}

const OLD_NEXT_CALLS = 20;

/** Measures the per-pair walk on the same data, each operation within its budget. */
export async function oldStage(o: StageOptions): Promise<OldResult> {
  const url = withDatabase(o.serverUrl, o.dbName);
  const orm = await createOrm({ clientUrl: url }, { pool: { min: 0, max: 4 } });
  try {
    const f = await facts(orm, o);
    const random = new Random(o.seed ^ 0x4e58);

    let p = phase('old walk: next work for a worker', OLD_NEXT_CALLS);
    const deadline = performance.now() + o.oldCapMs;
    const complete: number[] = [];
    let partial: number | null = null;
    for (let i = 0; i < OLD_NEXT_CALLS && performance.now() < deadline; i++) {
      const walk = await oldNextForWorker(orm, random.pick(f.slots), f.pending, deadline);
      if (walk.complete) complete.push(walk.ms);
      else if (!complete.length) partial = fullDuration(walk);
      p.update(i + 1);
    }
    const l: Latencies = latencies(complete);
    const nextWork: OldMeasure = complete.length
      ? { ms: l.p50, extrapolated: false, runs: complete.length }
      : { ms: partial ?? NaN, extrapolated: true, runs: 0 };
    p.end(`${nextWork.extrapolated ? '~' : 'p50 '}${(nextWork.ms / 1000).toFixed(2)} s per call`);

    p = phase('old walk: full pass');
    const pass = await oldPass(orm, f.slots, f.pending, performance.now() + o.oldCapMs);
    const passResult = pass.walks
      ? {
          perSecond: (pass.assignments * 1000) / pass.ms,
          assignments: pass.assignments,
          walks: pass.walks,
          extrapolated: false,
        } // a rate over the walks that fitted
      : { perSecond: 1000 / nextWork.ms, assignments: 0, walks: 0, extrapolated: true }; // not one walk fitted: at best one assignment per walk
    p.end(`${passResult.perSecond.toFixed(2)} assignments/s (${pass.walks} walks)`);

    p = phase(`old walk: candidates of ${f.candidateIds.length}`);
    const cands = await oldCandidates(orm, f.candidateIds, performance.now() + o.oldCapMs);
    const candidates: OldMeasure = {
      ms: fullDuration(cands),
      extrapolated: !cands.complete,
      runs: cands.complete ? 1 : 0,
    };
    p.end(`${candidates.extrapolated ? '~' : ''}${(candidates.ms / 1000).toFixed(2)} s`);

    p = phase('old walk: demand of 10 pools');
    const pools = await orm.em
      .fork()
      .getConnection()
      .execute<
        { name: string; provided_tags: string[]; required_tags: string[]; specifications: Record<string, unknown> }[]
      >(`select name, provided_tags, required_tags, specifications from worker_pool where enabled order by name`);
    const oldPools = pools.map((x) =>
      poolAsMetadata(
        x.name,
        computePoolTemplateTags(
          poolTagInput({
            name: x.name,
            providedTags: x.provided_tags,
            requiredTags: x.required_tags,
            specifications: x.specifications,
          }),
        ).providedTags,
      ),
    );
    const dem = await oldDemand(orm, oldPools, f.pending, performance.now() + o.oldCapMs);
    const demand: OldMeasure = { ms: fullDuration(dem), extrapolated: !dem.complete, runs: dem.complete ? 1 : 0 };
    p.end(`${demand.extrapolated ? '~' : ''}${(demand.ms / 1000).toFixed(2)} s`);

    return { nextWork, pass: passResult, candidates, demand, memory: memory() };
  } finally {
    await orm.close(true);
  }
}
