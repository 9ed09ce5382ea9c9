import type { EntityManager } from '@mikro-orm/postgresql';
import DataLoader from 'dataloader';
import type { Config } from './config.js';
import { intArray } from './db/arrays.js';
import { candidatesOf, loadTaskTags } from './scheduler/candidates.js';
import { loadPoolTemplates, type PoolTemplate } from './scheduler/pool-templates.js';
import { loadWorkerStates, type WorkerState } from './scheduler/snapshot.js';
import type { WorkerSnapshot } from './scheduler/worker-snapshot.js';

/** Per-operation batch loaders for values that are not objects of the schema (objects use Pothos loadable refs). */
export interface Loaders {
  /** Number of ASSIGNED or RUNNING work requests per worker id. */
  readonly activeWorkCount: DataLoader<number, number>;
  /** The ids a work request depends on, per work request id. */
  readonly dependencyIds: DataLoader<number, number[]>;
  /** Every active worker with its load, read once per operation. */
  workerStates(): Promise<WorkerState[]>;
  /** The enabled pools with their template tags, read once per operation. */
  poolTemplates(): Promise<PoolTemplate[]>;
  /** The candidate workers per work request id (all matching, or only those with a free slot now). */
  candidates(availableOnly: boolean): DataLoader<number, WorkerState[]>;
}

/** Creates fresh loaders for one operation; `snapshot` is the process's snapshot of the workers' shapes. */
export function createLoaders(em: EntityManager, config: Config, snapshot?: WorkerSnapshot): Loaders {
  let states: Promise<WorkerState[]> | null = null;
  const workerStates = () => (states ??= loadWorkerStates(em, new Date(), config.metadataFreshMs, snapshot));
  const candidateLoaders = new Map<boolean, DataLoader<number, WorkerState[]>>();
  let templates: Promise<PoolTemplate[]> | null = null;
  return {
    workerStates,
    poolTemplates: () => (templates ??= loadPoolTemplates(em, config)),
    candidates(availableOnly) {
      let loader = candidateLoaders.get(availableOnly);
      if (!loader) {
        loader = new DataLoader(async (ids) => {
          const [tasks, workers] = await Promise.all([loadTaskTags(em, ids), workerStates()]);
          const found = candidatesOf(tasks, workers, availableOnly, snapshot ? (required) => snapshot.keying(required) : undefined);
          return ids.map((id) => found.get(id) ?? []);
        });
        candidateLoaders.set(availableOnly, loader);
      }
      return loader;
    },
    activeWorkCount: new DataLoader(async (ids) => {
      const rows = await em.execute<{ worker_id: number; n: number }[]>(
        `select worker_id, count(*)::int as n from work_request
          where worker_id = any(?::int[]) and status in ('ASSIGNED', 'RUNNING') group by worker_id`,
        [intArray(ids)],
      );
      const byId = new Map(rows.map((r) => [r.worker_id, r.n]));
      return ids.map((id) => byId.get(id) ?? 0);
    }),
    dependencyIds: new DataLoader(async (ids) => {
      const rows = await em.execute<{ work_request_id: number; depends_on_id: number }[]>(
        'select work_request_id, depends_on_id from work_request_dependency where work_request_id = any(?::int[]) order by depends_on_id',
        [intArray(ids)],
      );
      return ids.map((id) => rows.filter((r) => r.work_request_id === id).map((r) => r.depends_on_id));
    }),
  };
}
