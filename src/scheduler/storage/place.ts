import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkersConfig } from '../../core/config/workers.js';
import { executeInOneTrip, type TripStatement } from '../../storage/db/one-trip.js';
import { hasFreeSlotSql } from '../rules/active-work.js';
import { availableParams, availableSql } from '../rules/availability.js';
import { mayFitParams, mayFitSql } from '../rules/fit.js';
import type { ClassCache } from '../matching/class-cache.js';
import { assignNextWork, assignNextWorkInOneTrip, type NextAssignment, type PullShape } from './next-work.js';
import { heaviness } from '../rules/heavy-work.js';
import { staticFirstSql, workerPreference, placementFigures, type Preferable } from '../rules/placement-preference.js';
import type { TaskHistoryCache } from './task-history.js';

const CANDIDATES = 32; // free workers read for one request; the tag test in SQL leaves few false ones
const ATTEMPTS = 4; // workers tried before the request is left to the next pass

/**
 * Free, available workers that may run a class, as far as SQL can tell cheaply: every plain tag the
 * class requires is among the worker's provided tags, and the worker's plain requirements are among
 * the class's significant provided tags. Minimums (`NAME>=N`) on either side are left to the exact
 * test in memory, so this only ever lets through too many, never too few, of the first workers
 * (static workers before pool workers, as workerPreference orders them).
 */
export const FREE_FOR_CLASS_SQL = `
  select w.id, w.type, w.shape_version::text as version, w.pool_id, to_json(w.provided_tags) as provided_tags, to_json(w.required_tags) as required_tags
    from worker w
   where ${availableSql('w')}
     and ${mayFitSql('w')}
     and ${hasFreeSlotSql('w')}
   order by ${staticFirstSql('w')}
   limit ${CANDIDATES}`;

/**
 * FREE_FOR_CLASS_SQL (or `walk`, a statement made of it such as its EXPLAIN) between the planner
 * settings it needs and their reset, as one trip (executeInOneTrip): the second of its three
 * statements answers the workers. The walk must follow the index worker_placement_order and stop at
 * the first CANDIDATES workers that pass: a sort instead reads every available worker and counts each
 * one's work (120 ms at 10,000 workers instead of 2 ms). PostgreSQL picks the sort when its statistics
 * make the tag test look rare, as they do after workers registered without tags (their metadata comes
 * later) were analysed; without the sort the walk is never worse, since the sort's plan reads every
 * row anyway. The same estimate prices the walk as if it read every worker, over the cost at which
 * PostgreSQL compiles a statement (jit_above_cost): at 10,000 workers that was 15 ms of compiling for a
 * walk that runs in 0.3 ms, so compiling is off too. The settings are the transaction's for that one
 * statement: the first statement keeps what they were in settings of our own, which the third puts
 * back, so the rest of the transaction plans as usual.
 */
export function freeForClassTrip(params: readonly unknown[], walk = FREE_FOR_CLASS_SQL): TripStatement[] {
  return [
    {
      sql: `select set_config('tagsched.enable_sort_was', current_setting('enable_sort'), true), set_config('tagsched.jit_was', current_setting('jit'), true),
                   set_config('enable_sort', 'off', true), set_config('jit', 'off', true)`,
    },
    { sql: walk, params },
    {
      sql: `select set_config('enable_sort', current_setting('tagsched.enable_sort_was'), true), set_config('jit', current_setting('tagsched.jit_was'), true)`,
    },
  ];
}

/**
 * Places a request that just became PENDING, at once: the reverse of requestWork. It looks for a
 * free worker that may run the request's class and lets that worker pull (assignNextWork), so the
 * worker gets what it would have got by asking: the first request in queue order of all the classes
 * it may run, which is the new one unless older work it may run is waiting too. Workers are tried in
 * the pass's order of preference (placement-preference.ts: static before pool workers, then the largest for
 * heavy work (heavy-work.ts, by its size class or its task's history) and the smallest for other work, then
 * the specialised, then the oldest). Workers busy in another transaction are skipped, not waited for.
 *
 * This spares the full pass (every connected worker loaded and locked) for the common case of a
 * request arriving when workers are idle. When it finds no worker, the request waits for the next
 * pass, as before. Outside a transaction, each assignment is committed on its own (in one round trip
 * when it can be: assignNextWorkInOneTrip) and handed to `onAssigned` at once; in the caller's
 * transaction, they are made in it. Returns the assignments made, each with its request's row (there
 * may be one for an older request, and none for this one).
 */
export async function placeRequest(
  em: EntityManager,
  cache: ClassCache,
  history: TaskHistoryCache,
  config: WorkersConfig,
  request: { readonly id: number; readonly classId: number; readonly taskType: string; readonly taskName: string },
  now: Date,
  onAssigned?: (assignment: NextAssignment) => void,
): Promise<NextAssignment[]> {
  await cache.refreshIfBehind(em, request.classId);
  const taskClass = cache.get(request.classId);
  if (!taskClass) return [];
  const [, rows] = await executeInOneTrip<
    [
      unknown[],
      {
        id: number;
        type: string;
        version: string;
        pool_id: number | null;
        provided_tags: string[];
        required_tags: string[];
      }[],
      unknown[],
    ]
  >(em, freeForClassTrip([...availableParams(now, config.metadataFreshMs), ...mayFitParams(taskClass)]));
  const candidates: (Preferable & { shape: PullShape })[] = [];
  for (const r of rows) {
    const shape: PullShape = {
      version: r.version,
      type: r.type,
      providedTags: r.provided_tags,
      requiredTags: r.required_tags,
    };
    const eligible = cache.eligibleFor(shape);
    if (eligible.includes(request.classId))
      candidates.push({
        id: r.id,
        shape,
        eligible: eligible.length,
        pooled: r.pool_id !== null,
        ...placementFigures(r.provided_tags),
      });
  }
  candidates.sort(
    workerPreference(
      heaviness(taskClass.requiredTags, request.taskType, request.taskName, await history.get(em, now)).heavy,
    ),
  );

  const assignments: NextAssignment[] = [];
  const durations = await history.get(em, now);
  for (const c of candidates.slice(0, ATTEMPTS)) {
    // Outside a transaction, one trip with the shape the walk read; in one, or when that trip cannot
    // decide (the worker changed since the walk, every head taken), the pull's transaction.
    let assignment = await assignNextWorkInOneTrip(em, cache, config, c.id, c.shape, now, { skipLocked: true });
    if (assignment === undefined) {
      assignment = em.isInTransaction()
        ? await assignNextWork(em, cache, config, c.id, now, { skipLocked: true, durations })
        : await em.transactional((tx) => assignNextWork(tx, cache, config, c.id, now, { skipLocked: true, durations }));
    }
    if (!assignment) continue; // busy elsewhere, or full by now
    assignments.push(assignment);
    if (!em.isInTransaction()) onAssigned?.(assignment); // committed: it may be published
    if (assignment.workRequestId === request.id) break;
  }
  return assignments;
}
