/**
 * The per-pair walk that tags replace (Debusine 0.16, as the issue describes it), on the same data:
 * to find work for a worker, read every pending request in queue order, instantiate its task
 * (validate its taskData and run the task's analysis for its requirements), and check the
 * worker's metadata against it, `can_run_on(worker_metadata)`; every candidate is collected before
 * the first one is taken. Candidates of a request walk every worker the same way.
 *
 * The old check knows only what a task itself requires (worker type, task version, architecture,
 * executor, tool): no exclusive workers, no memory minimum, no admin classes. It checks less than
 * the tag match, so it is, if anything, faster than a faithful equivalent would be.
 *
 * Every walk stops at a deadline and reports how far it got, so that its full cost can be
 * extrapolated linearly (the walk's cost is linear in the pairs it visits).
 */
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { validateTaskInput } from '../src/core/tasks/analyze.js';
import type { TaskTag } from '../src/core/tasks/types.js';
import type { WorkerMetadata } from '../src/core/tags/worker-tags.js';

const FETCH_ROWS = 5_000; // rows per FETCH of the server-side cursor, as a Django .iterator() would read

/** A worker as the old scheduler reads it: its type and both metadata dictionaries. */
export interface OldWorker {
  readonly id: number;
  readonly name: string;
  readonly type: string;
  readonly staticMetadata: WorkerMetadata;
  readonly dynamicMetadata: WorkerMetadata;
}

/** How far a walk got before its deadline. */
export interface WalkProgress {
  readonly ms: number;
  /** Pairs (request, worker) checked. */
  readonly visited: number;
  /** Pairs a complete walk checks. */
  readonly total: number;
  readonly complete: boolean;
}

/** The full duration of a walk, measured or extrapolated from its progress, in milliseconds. */
export function fullDuration(p: WalkProgress): number {
  return p.complete || p.visited === 0 ? p.ms : (p.ms * p.total) / p.visited;
}

/** `worker.metadata()`: static over dynamic, merged on every call, as the old model did. */
function metadataOf(w: OldWorker): WorkerMetadata {
  return { ...w.dynamicMetadata, ...w.staticMetadata };
}

const includes = (list: unknown, value: string) => Array.isArray(list) && list.includes(value);

/** `task.can_run_on(worker_metadata)`: each requirement of the task checked against a metadata fact. */
export function canRunOn(requirements: readonly TaskTag[], workerType: string, metadata: WorkerMetadata): boolean {
  for (const { tag } of requirements) {
    const parts = tag.split(':');
    switch (`${parts[0]}:${parts[1]}`) {
      case 'worker:type':
        if (parts[2] !== workerType) return false;
        break;
      case 'worker:task': {
        const [, , type, name, , version] = parts;
        const tasks = metadata['system:tasks'];
        if (
          !Array.isArray(tasks) ||
          !tasks.some((t) => t.type === type && t.name === name && String(t.version) === version)
        )
          return false;
        break;
      }
      case 'worker:build-arch':
        if (!includes(metadata['system:architectures'], parts[2])) return false;
        break;
      case 'worker:executor':
        if (!includes(metadata['system:executors'], parts[2])) return false;
        break;
      case 'worker:cap':
        if (!includes(metadata['system:tools'], parts[2])) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

/** Instantiates a request's task: validation of its data, then the task's own analysis of what it requires. */
export function taskRequirements(taskType: string, taskName: string, taskData: unknown): TaskTag[] | null {
  const v = validateTaskInput(taskType, taskName, taskData);
  if (!v.ok) return null;
  const own = v.task.analyze(v.data, { environment: null, defaultArchitecture: 'amd64' });
  return [
    { tag: `worker:type:${v.task.type}`, source: 'task-registry' },
    { tag: `worker:task:${v.task.type}:${v.task.name}:version:${v.task.version}`, source: 'task-registry' },
    ...own.required,
  ];
}

interface PendingRow {
  id: number;
  task_type: string;
  task_name: string;
  task_data: unknown;
}

/** Reads the pending queue in order through a server-side cursor, batch by batch, until told to stop. */
async function walkQueue(em: EntityManager, onBatch: (rows: PendingRow[]) => boolean): Promise<void> {
  await em.transactional(async (tx) => {
    await tx.execute(
      `declare old_walk no scroll cursor for
         select id, task_type, task_name, task_data from work_request
          where status = 'PENDING' order by priority_base + priority_adjustment desc, created_at, id`,
    );
    for (;;) {
      const rows = await tx.execute<PendingRow[]>(`fetch ${FETCH_ROWS} from old_walk`);
      if (!rows.length || !onBatch(rows)) break;
    }
    await tx.execute('close old_walk');
  });
}

/** Loads workers as the old scheduler would: everything connected and enabled, with both metadata dictionaries. */
export async function loadOldWorkers(em: EntityManager, ids?: readonly number[]): Promise<OldWorker[]> {
  const rows = await em.execute<
    { id: number; name: string; type: string; static_metadata: WorkerMetadata; dynamic_metadata: WorkerMetadata }[]
  >(
    `select id, name, type, static_metadata, dynamic_metadata from worker
      where enabled and not draining and connected_at is not null and terminated_at is null ${ids ? 'and id = any(?::int[])' : ''} order by id`,
    ids ? [`{${ids.join(',')}}`] : [],
  );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    type: r.type,
    staticMetadata: r.static_metadata,
    dynamicMetadata: r.dynamic_metadata,
  }));
}

/** The old next-work of one worker: every pending request instantiated and checked, then the first candidate taken. */
export async function oldNextForWorker(
  orm: MikroORM,
  workerId: number,
  pending: number,
  deadline: number,
  taken: ReadonlySet<number> = new Set(),
): Promise<WalkProgress & { first: number | null }> {
  const started = performance.now();
  const em = orm.em.fork();
  const [worker] = await loadOldWorkers(em, [workerId]);
  const candidates: number[] = [];
  let visited = 0;
  await walkQueue(em, (rows) => {
    for (const r of rows) {
      visited++;
      if (taken.has(r.id)) continue; // assigned earlier in this pass
      const requirements = taskRequirements(r.task_type, r.task_name, r.task_data);
      if (requirements && canRunOn(requirements, worker.type, metadataOf(worker))) candidates.push(r.id);
    }
    return performance.now() <= deadline;
  });
  return {
    ms: performance.now() - started,
    visited,
    total: pending,
    complete: visited >= pending,
    first: candidates[0] ?? null,
  };
}

/** The old pass: one walk per free slot of each available worker, in worker order, each taking its first candidate. */
export async function oldPass(
  orm: MikroORM,
  slots: readonly number[],
  pending: number,
  deadline: number,
): Promise<{ ms: number; assignments: number; walks: number; complete: boolean }> {
  const started = performance.now();
  const taken = new Set<number>();
  let walks = 0;
  let ms = 0; // up to the end of the last complete walk
  for (const workerId of slots) {
    if (performance.now() > deadline) break;
    const walk = await oldNextForWorker(orm, workerId, pending, deadline, taken);
    if (!walk.complete) break; // cut by the deadline: its candidate would not be the right one
    walks++;
    ms = performance.now() - started;
    if (walk.first !== null) taken.add(walk.first);
  }
  return { ms, assignments: taken.size, walks, complete: walks === slots.length };
}

/** The old candidates of many requests: each request instantiated once, then checked against every worker. */
export async function oldCandidates(
  orm: MikroORM,
  requestIds: readonly number[],
  deadline: number,
): Promise<WalkProgress & { found: number }> {
  const started = performance.now();
  const em = orm.em.fork();
  const workers = await loadOldWorkers(em);
  const requests = await em.execute<PendingRow[]>(
    `select id, task_type, task_name, task_data from work_request where id = any(?::int[])`,
    [`{${requestIds.join(',')}}`],
  );
  let visited = 0;
  let found = 0;
  for (const r of requests) {
    const requirements = taskRequirements(r.task_type, r.task_name, r.task_data);
    for (const w of workers) {
      visited++;
      if (requirements && canRunOn(requirements, w.type, metadataOf(w))) found++;
    }
    if (performance.now() > deadline) break;
  }
  const total = requests.length * workers.length;
  return { ms: performance.now() - started, visited, total, complete: visited >= total, found };
}

/** A pool as the old check can read it: the metadata its instances would report, from its template tags. */
export interface OldPool {
  readonly name: string;
  readonly metadata: WorkerMetadata;
}

/** Turns pool template tags back into the metadata facts the old check reads. */
export function poolAsMetadata(name: string, providedTags: readonly string[]): OldPool {
  const after = (prefix: string) => providedTags.filter((t) => t.startsWith(prefix)).map((t) => t.slice(prefix.length));
  const tasks = after('worker:task:').map((t) => {
    const [type, taskName, , version] = t.split(':');
    return { type, name: taskName, version: Number(version) };
  });
  return {
    name,
    metadata: {
      'system:architectures': after('worker:build-arch:'),
      'system:executors': after('worker:executor:'),
      'system:tools': after('worker:cap:'),
      'system:tasks': tasks,
    },
  };
}

/** The old demand: every pending request instantiated and checked against every pool. */
export async function oldDemand(
  orm: MikroORM,
  pools: readonly OldPool[],
  pending: number,
  deadline: number,
): Promise<WalkProgress & { runnable: number[] }> {
  const started = performance.now();
  const runnable = pools.map(() => 0);
  let visited = 0;
  await walkQueue(orm.em.fork(), (rows) => {
    for (const r of rows) {
      const requirements = taskRequirements(r.task_type, r.task_name, r.task_data);
      pools.forEach((p, i) => {
        visited++;
        if (requirements && canRunOn(requirements, 'worker', p.metadata)) runnable[i]++;
      });
    }
    return performance.now() <= deadline;
  });
  const total = pending * pools.length;
  return { ms: performance.now() - started, visited, total, complete: visited >= total, runnable };
}
