import type { OfferingMark } from '../providers/offerings.js';
import { readOfferingMarks } from '../services/pools/offering-marks.js';
import type { EntityName, FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import DataLoader from 'dataloader';
import type { Config } from '../core/config/config.js';
import type { Instance } from '../storage/entities/instance.js';
import { activeWorkCounts } from '../scheduler/storage/active-work.js';
import {
  sharingWorkers,
  workerResourceStates,
  type WorkerResourceState,
} from '../scheduler/storage/worker-resources.js';
import { instancePages } from '../services/pools/instance-reads.js';
import { fitsResources, NO_RESOURCES } from '../scheduler/rules/resources.js';
import { candidatesOf, loadTaskTags, type TaskTagsRow } from '../scheduler/matching/candidates.js';
import type { ClassCache } from '../scheduler/matching/class-cache.js';
import type { PlacementContext, PoolContext } from '../scheduler/matching/diagnosis.js';
import { launchingInstances } from '../scheduler/storage/launching-instances.js';
import { poolLaunches } from '../scheduler/storage/pool-launches.js';
import { monthUseByPool } from '../scheduler/storage/pool-runtime.js';
import { workerPrices, type WorkerPrice } from '../scheduler/storage/instance-prices.js';
import type { PoolTemplate } from '../scheduler/matching/pool-template.js';
import { loadPoolTemplates } from '../scheduler/storage/pool-templates.js';
import type { QueuePosition } from '../scheduler/rules/queue-order.js';
import { queuePositions } from '../scheduler/storage/queue-position.js';
import {
  activeRuns,
  aheadRuns,
  estimateErrors,
  type ActiveRun,
  type AheadRun,
} from '../scheduler/storage/start-estimate.js';
import type { Backoff } from '../scheduler/rules/release-backoff.js';
import { backoffsOf } from '../scheduler/storage/release-backoffs.js';
import type { WorkerState } from '../scheduler/matching/worker-state.js';
import { loadWorkerStates } from '../scheduler/storage/worker-snapshot.js';
import type { TaskHistoryCache } from '../scheduler/storage/task-history.js';
import type { WorkerSnapshot } from '../scheduler/storage/worker-snapshot.js';

/** The process's scheduler caches a diagnosis places a request with (the Scheduler has them). */
export interface PlacementCaches {
  readonly classes: ClassCache;
  readonly history: TaskHistoryCache;
}

/** Per-operation batch loaders for values that are not objects of the schema (objects use Pothos loadable refs). */
export interface Loaders {
  /** Number of ASSIGNED or RUNNING work requests per worker id. */
  readonly activeWorkCount: DataLoader<number, number>;
  /** What each worker that shares its resources has free and whom it is held for, by worker id (null: it has slots). */
  readonly workerResources: DataLoader<number, WorkerResourceState | null>;
  /** Whether each worker shares its resources (rather than having fixed slots), by worker id. */
  readonly sharesResources: DataLoader<number, boolean>;
  /** Every active worker with its load, read once per operation. */
  workerStates(): Promise<WorkerState[]>;
  /** Every worker that shares its resources: what it offers, has free and is held for, by id (read once per operation). */
  hostStates(): Promise<Map<number, WorkerResourceState>>;
  /** The enabled pools with their template tags, read once per operation. */
  poolTemplates(): Promise<PoolTemplate[]>;
  /** Each pool's runtime this month, in seconds, by pool id (read once per operation). */
  monthRuntimes(): Promise<Map<number, number>>;
  /** Each pool's instances' cost this month, by pool id (read with the runtimes, once per operation). */
  monthCosts(): Promise<Map<number, number>>;
  /** What a diagnosis describes the matching pools with: their launching instances and runtime (read once per operation). */
  poolContext(): Promise<PoolContext>;
  /**
   * Each pool's instances, newest first: `size` of them at most, in `states` when given, older than
   * the instance `olderThan` when given; per pool id, one statement for all the pools of a list.
   */
  instancePage(page: {
    states: readonly string[] | null;
    size: number;
    olderThan: number | null;
  }): DataLoader<number, Instance[]>;
  /** The release backoffs in force per work request id. */
  readonly releaseBackoffs: DataLoader<number, Backoff[]>;
  /** The marks of unavailable offerings that hold now, per pool id (services/pools/offering-marks.ts). */
  readonly offeringMarks: DataLoader<number, OfferingMark[]>;
  /** Each worker's instance price and concurrency, by worker id (null: no instance), for a work request's cost. */
  readonly workerPrices: DataLoader<number, WorkerPrice | null>;
  /** Where each pending request stands in its class's queue, per work request id (null when it is not PENDING). */
  readonly queuePositions: DataLoader<number, QueuePosition | null>;
  /** The tasks ahead of each pending request in its class's queue, in order (at most SIMULATED_AHEAD each), for its start estimate. */
  readonly aheadRuns: DataLoader<number, AheadRun[]>;
  /** The active work of each worker by id, for start estimates. */
  readonly activeRuns: DataLoader<number, ActiveRun[]>;
  /** The start estimate errors kept per class id (newest last). */
  readonly estimateErrors: DataLoader<number, number[]>;
  /** The task history and the workers' eligible class counts a diagnosis places requests with, read once per operation; null without the caches. */
  placementContext(): Promise<PlacementContext | null>;
  /** The tags of work requests by id (null: no such request), for the candidates; `candidateWorkers` primes it. */
  readonly taskTags: DataLoader<number, TaskTagsRow | null>;
  /** The candidate workers per work request id (all matching, or only those with a free slot now). */
  candidates(availableOnly: boolean): DataLoader<number, WorkerState[]>;
  /**
   * Objects of the schema by id, the same whoever asks: the loadable refs load through these, so that
   * the subscribers of one event, whatever their viewers, share one statement per kind of object.
   */
  byId<T extends { id: number }>(entity: EntityName<T>, populate?: readonly string[]): DataLoader<number, T | null>;
}

/**
 * Creates fresh loaders for one operation; `snapshot` is the process's snapshot of the workers'
 * shapes, `caches` its class cache and task history (for the placement part of diagnoses).
 */
export function createLoaders(
  em: EntityManager,
  config: Pick<Config, 'workers' | 'tags' | 'provisioner'>,
  snapshot?: WorkerSnapshot,
  caches?: PlacementCaches,
): Loaders {
  let states: Promise<WorkerState[]> | null = null;
  const workerStates = () => (states ??= loadWorkerStates(em, new Date(), config.workers.metadataFreshMs, snapshot));
  let hosts: Promise<Map<number, WorkerResourceState>> | null = null;
  const hostStates = () => (hosts ??= workerResourceStates(em, null));
  const candidateLoaders = new Map<boolean, DataLoader<number, WorkerState[]>>();
  const taskTags = new DataLoader<number, TaskTagsRow | null>(async (ids) => {
    const found = new Map((await loadTaskTags(em, ids)).map((t) => [t.id, t]));
    return ids.map((id) => found.get(id) ?? null);
  });
  let templates: Promise<PoolTemplate[]> | null = null;
  const byIdLoaders = new Map<unknown, DataLoader<number, unknown>>();
  let uses: ReturnType<typeof monthUseByPool> | null = null;
  const instancePageLoaders = new Map<string, DataLoader<number, Instance[]>>();
  let placement: Promise<PlacementContext | null> | null = null;
  let poolContext: Promise<PoolContext> | null = null;
  const monthUse = () => (uses ??= monthUseByPool(em));
  const monthRuntimes = () => monthUse().then((u) => u.runtime);
  const monthCosts = () => monthUse().then((u) => u.cost);
  return {
    aheadRuns: new DataLoader(async (ids) => {
      const found = await aheadRuns(em, ids);
      return ids.map((id) => found.get(id) ?? []);
    }),
    activeRuns: new DataLoader(async (ids) => {
      const found = await activeRuns(em, ids);
      return ids.map((id) => found.get(id) ?? []);
    }),
    estimateErrors: new DataLoader(async (ids) => {
      const found = await estimateErrors(em, ids);
      return ids.map((id) => found.get(id) ?? []);
    }),
    poolContext: () =>
      (poolContext ??= Promise.all([launchingInstances(em), monthUse(), poolLaunches(em)]).then(
        ([launching, use, launches]) => ({
          launching,
          runtime: use.runtime,
          cost: use.cost,
          committed: use.committed,
          launchesLastMinute: new Map([...launches].map(([id, l]) => [id, l.lastMinute])),
          degradedAfterFailures: config.provisioner.degradedAfterFailures,
          now: new Date(),
        }),
      )),
    placementContext: () =>
      (placement ??= caches
        ? Promise.all([caches.classes.refresh(em), caches.history.get(em)]).then(([, history]) => ({
            history,
            eligibleCount: (w: WorkerState) => caches.classes.eligibleFor(w).length,
          }))
        : Promise.resolve(null)),
    queuePositions: new DataLoader(async (ids) => {
      const found = await queuePositions(em, ids);
      return ids.map((id) => found.get(id) ?? null);
    }),
    byId<T extends { id: number }>(entity: EntityName<T>, populate: readonly string[] = []) {
      let loader = byIdLoaders.get(entity) as DataLoader<number, T | null> | undefined;
      if (!loader) {
        loader = new DataLoader<number, T | null>(async (ids) => {
          const rows = (await em.find(entity, { id: { $in: [...ids] } } as unknown as FilterQuery<T>, {
            populate: populate as never,
          })) as T[];
          const found = new Map(rows.map((r) => [r.id, r]));
          return ids.map((id) => found.get(id) ?? null);
        });
        byIdLoaders.set(entity, loader as DataLoader<number, unknown>);
      }
      return loader;
    },
    instancePage(page) {
      const key = JSON.stringify(page);
      let loader = instancePageLoaders.get(key);
      if (!loader) {
        loader = new DataLoader(async (poolIds) => {
          const found = await instancePages(em, poolIds, page);
          return poolIds.map((id) => found.get(id) ?? []);
        });
        instancePageLoaders.set(key, loader);
      }
      return loader;
    },
    monthRuntimes,
    monthCosts,
    workerPrices: new DataLoader(async (ids) => {
      const found = await workerPrices(em, ids);
      return ids.map((id) => found.get(id) ?? null);
    }),
    offeringMarks: new DataLoader(async (ids) => {
      const found = await readOfferingMarks(em, ids, new Date());
      return ids.map((id) => found.get(id) ?? []);
    }),
    releaseBackoffs: new DataLoader(async (ids) => {
      const found = await backoffsOf(em, ids, new Date());
      return ids.map((id) => found.get(id) ?? []);
    }),
    workerStates,
    hostStates,
    taskTags,
    poolTemplates: () => (templates ??= loadPoolTemplates(em, config.tags)),
    candidates(availableOnly) {
      let loader = candidateLoaders.get(availableOnly);
      if (!loader) {
        loader = new DataLoader(async (ids) => {
          const [tags, workers] = await Promise.all([taskTags.loadMany(ids), workerStates()]);
          const tasks = tags.filter((t): t is TaskTagsRow => t !== null && !(t instanceof Error));
          const found = candidatesOf(
            tasks,
            workers,
            availableOnly,
            snapshot ? (required) => snapshot.keying(required) : undefined,
            // A request that reserves nothing fits every host: the hosts are read only when one reserves something.
            tasks.some((t) => t.reserved && !fitsResources(t.reserved, NO_RESOURCES)) ? await hostStates() : undefined,
          );
          return ids.map((id) => found.get(id) ?? []);
        });
        candidateLoaders.set(availableOnly, loader);
      }
      return loader;
    },
    activeWorkCount: new DataLoader(async (ids) => {
      const found = await activeWorkCounts(em, ids);
      return ids.map((id) => found.get(id) ?? 0);
    }),
    workerResources: new DataLoader(async (ids) => {
      const found = await workerResourceStates(em, ids);
      return ids.map((id) => found.get(id) ?? null);
    }),
    sharesResources: new DataLoader(async (ids) => {
      const found = await sharingWorkers(em, ids);
      return ids.map((id) => found.has(id));
    }),
  };
}
