import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { intArray } from '../../storage/db/arrays.js';
import { retryingDeadlocks } from '../../storage/db/deadlocks.js';
import { LAUNCHING_OR_RUNNING_SQL, LIVE_INSTANCE_SQL, type InstanceState } from '../../core/instance-state.js';
import type { Worker } from '../../storage/entities/worker.js';
import { InvalidStateError } from '../../core/errors.js';
import type { Events } from '../../storage/events.js';
import { requireAdmin, type Viewer } from '../identity/auth.js';
import { settleDependents } from '../workflows/settle-dependents.js';
import { findWorker } from './find-worker.js';
import type { LeaseChange } from '../../scheduler/storage/leases.js';
import { requeueWorkOf } from '../../scheduler/storage/leases.js';

/** What becomes of the instance of a terminated worker: to be stopped at its provider, or already gone. */
export type InstanceEnd =
  | { readonly state: Extract<InstanceState, 'STOPPING'> }
  | { readonly state: Extract<InstanceState, 'TERMINATED' | 'FAILED'>; readonly error: string | null };

/** What a termination changed: the workers terminated, the requests taken back, the dependents settled. */
export interface Terminated {
  readonly workers: { id: number; name: string }[];
  readonly requeued: LeaseChange[];
  readonly settled: { id: number; workspaceId: number }[];
}

/**
 * Terminates pool workers (docs/design.md: pools and instances), inside the caller's transaction: each becomes INACTIVE
 * (hidden, no capacity, no new work, its tokens refused); what it held goes back to the queue
 * (requeueWorkOf: work not started at once, running work as a retry); its instance, if it has one,
 * ends as `end` says. Workers already terminated change nothing but their instance. The caller
 * publishes (publishTermination) after its commit.
 */
export async function terminateIn(
  tx: EntityManager,
  config: Pick<Config, 'leases' | 'tags' | 'statistics'>,
  workerIds: readonly number[],
  reason: string,
  end: InstanceEnd,
  now: Date,
  /** false: its running work goes back without counting a retry (requeueWorkOf). */
  countRetries = true,
): Promise<Terminated> {
  if (!workerIds.length) return { workers: [], requeued: [], settled: [] };
  const ids = intArray(workerIds);
  // The worker rows first, locked: a pass or a pull that holds one has committed its assignment
  // by the time this goes on, and none can assign to them afterwards (they re-check under the lock).
  const workers = await tx.execute<{ id: number; name: string }[]>(
    `update worker set terminated_at = ?, draining = true where id = any(?::int[]) and terminated_at is null returning id, name`,
    [now, ids],
  );
  await tx.execute(`update token set enabled = false where worker_id = any(?::int[]) and enabled`, [ids]);
  const requeued = await requeueWorkOf(tx, workerIds, reason, now, config.leases, countRetries);
  const aborted = requeued.filter((c) => c.status === 'ABORTED').map((c) => c.id);
  const settled = aborted.length ? await settleDependents(tx, config, aborted) : [];
  if (end.state === 'STOPPING') {
    await tx.execute(
      `update instance set state = 'STOPPING', stopping_at = ? where worker_id = any(?::int[]) and state in (${LAUNCHING_OR_RUNNING_SQL})`,
      [now, ids],
    );
  } else {
    await tx.execute(
      `update instance set state = ?, error = coalesce(?, error), terminated_at = ?
        where worker_id = any(?::int[]) and state in (${LIVE_INSTANCE_SQL})`,
      [end.state, end.error, now, ids],
    );
  }
  return { workers, requeued, settled };
}

/** The events of a committed termination: the workers, and every request it changed. */
export function publishTermination(events: Events, t: Terminated): void {
  for (const w of t.workers) events.publish('workerChanged', w);
  for (const c of t.requeued) events.publish('workRequestChanged', { id: c.id, workspaceId: c.workspaceId });
  for (const s of t.settled) events.publish('workRequestChanged', s);
}

/** terminateIn in a transaction of its own (tried again after a deadlock), published after its commit. */
export async function terminateWorkers(
  em: EntityManager,
  config: Pick<Config, 'leases' | 'tags' | 'statistics'>,
  events: Events,
  workerIds: readonly number[],
  reason: string,
  end: InstanceEnd,
  now: Date = new Date(),
): Promise<Terminated> {
  const done = await retryingDeadlocks(() =>
    em.fork().transactional((tx) => terminateIn(tx, config, workerIds, reason, end, now)),
  );
  publishTermination(events, done);
  return done;
}

/**
 * An admin terminates a pool worker by hand: it becomes INACTIVE at once (its work back to the
 * queue) and its instance STOPPING, for the provisioner (or the site's own script) to stop at the
 * provider. A worker already terminated is answered as it is. Admin only.
 */
export async function terminateWorker(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'leases' | 'tags' | 'statistics'>,
  events: Events,
  input: { name: string },
): Promise<Worker> {
  requireAdmin(viewer);
  const worker = await findWorker(em, input.name, 'input.name');
  if (!worker.pool)
    throw new InvalidStateError(
      `worker "${worker.name}" is not a pool worker: only pool workers are terminated (disable or drain a static worker)`,
    );
  if (worker.terminatedAt) return worker;
  await terminateWorkers(em, config, events, [worker.id], 'by an admin', { state: 'STOPPING' });
  return (await em.refresh(worker)) ?? worker;
}
