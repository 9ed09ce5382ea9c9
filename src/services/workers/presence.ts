import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../storage/db/arrays.js';
import { WorkRequestSchema, type WorkRequest } from '../../storage/entities/work-request.js';
import { WorkerSchema, type Worker } from '../../storage/entities/worker.js';
import type { Events } from '../../storage/events.js';
import { UnauthenticatedError } from '../../core/errors.js';
import { markInstanceRunning } from './instance-running.js';
import { requireWorker, type Viewer } from '../identity/auth.js';

/**
 * What a worker's call (a pull, a heartbeat, a metadata report) records of its presence, in its one
 * home: the worker is seen now, and connected from now unless it already was; but while this process
 * is stopping (Context.serverStopping) it is seen only, since the process has recorded its workers
 * disconnected and the worker is connected again where it connects next. A SET list over a `worker`
 * row, and its parameters; a pull (requestWork, in its assignment's first trip: scheduler/storage/next-work.ts),
 * heartbeat and reportWorkerMetadata all write it.
 */
export function seenByCall(now: Date, stopping: boolean): { set: string; params: unknown[] } {
  return {
    set: 'last_seen_at = ?, connected_at = case when ?::boolean then connected_at else coalesce(connected_at, ?) end',
    params: [now, stopping, now],
  };
}

/**
 * A worker called, answered with its row: {@link seenByCall} in one statement, `em`'s entity of the
 * worker refreshed from the row it returns.
 */
export async function markSeenReturning(
  em: EntityManager,
  workerId: number,
  now: Date,
  stopping: boolean,
): Promise<Worker> {
  const seen = seenByCall(now, stopping);
  const [row] = await em.execute<Record<string, unknown>[]>(`update worker set ${seen.set} where id = ? returning *`, [
    ...seen.params,
    workerId,
  ]);
  if (!row) throw new UnauthenticatedError('the bearer token is for a worker that no longer exists');
  return em.map(WorkerSchema, row);
}

/**
 * A worker's agent says it is alive (and, when it is, that it is shutting down): {@link seenByCall},
 * its shutting-down flag set when given, in one statement.
 */
export async function heartbeat(
  em: EntityManager,
  viewer: Viewer,
  events: Events,
  input: { shuttingDown?: boolean | null },
  stopping: boolean,
): Promise<{ worker: Worker; assigned: WorkRequest[] }> {
  const me = requireWorker(viewer);
  const seen = seenByCall(new Date(), stopping);
  // The SET list's columns are the updated row's (w); `old` has only shutting_down.
  const [row] = await em.execute<Record<string, unknown>[]>(
    `update worker w set ${seen.set}, shutting_down = coalesce(?::boolean, w.shutting_down)
       from (select shutting_down from worker where id = ?) old
      where w.id = ?
     returning w.*, old.shutting_down as was_shutting_down_`,
    [...seen.params, input.shuttingDown ?? null, me.id, me.id],
  );
  if (!row) throw new UnauthenticatedError('the bearer token is for a worker that no longer exists');
  const { was_shutting_down_: wasShuttingDown, ...columns } = row;
  const worker = em.map(WorkerSchema, columns);
  if (wasShuttingDown !== worker.shuttingDown) events.publish('workerChanged', { id: worker.id, name: worker.name });
  // Assignments it has not acknowledged: a safety net for a push lost while the connection was down.
  const assigned = await unacknowledgedAssignments(em, worker.id);
  return { worker, assigned };
}

/**
 * What is assigned to a worker and not acknowledged yet (ASSIGNED), oldest assignment first: what a
 * heartbeat answers and a reconnecting agent's `assignments` subscription sends first (one statement).
 */
export function unacknowledgedAssignments(em: EntityManager, workerId: number): Promise<WorkRequest[]> {
  return em.find(
    WorkRequestSchema,
    { worker: workerId, status: 'ASSIGNED' },
    { orderBy: { assignedAt: 'asc', id: 'asc' } },
  );
}

/**
 * Workers' connections opened in the process `processId` (one statement): each is connected and seen
 * now, owned by that process (the one holding its WebSocket: services/processes/registry.ts), a fresh
 * agent is not shutting down, and its instance, if any, is RUNNING.
 */
export async function markManyConnected(
  em: EntityManager,
  events: Events,
  workerIds: readonly number[],
  processId: number,
): Promise<void> {
  if (!workerIds.length) return;
  const now = new Date();
  const rows = await em.execute<{ id: number; name: string; pool_id: number | null }[]>(
    `update worker set connected_at = ?, last_seen_at = ?, shutting_down = false, connected_process_id = ?
      where id = any(?::int[]) returning id, name, pool_id`,
    [now, now, processId, intArray(workerIds)],
  );
  // One instance at a time: each start is a sample of its pool's launch time.
  for (const w of rows) if (w.pool_id !== null) await markInstanceRunning(em, w.id, now);
  for (const w of rows) events.publish('workerChanged', { id: w.id, name: w.name });
}

/**
 * Workers whose connections the process `processId` still holds, taken back after a take-over
 * (services/processes/registry.ts) marked them disconnected while the process was silent (paused, cut
 * off from the database): each one owned by no process now is connected again, owned by this one, and
 * seen now. One that connected to another process meanwhile stays that process's. Returns those taken back.
 */
export async function reclaimConnected(
  em: EntityManager,
  events: Events,
  workerIds: readonly number[],
  processId: number,
): Promise<{ id: number; name: string }[]> {
  if (!workerIds.length) return [];
  const now = new Date();
  const rows = await em.execute<{ id: number; name: string }[]>(
    `update worker set connected_at = ?, last_seen_at = ?, connected_process_id = ?
      where id = any(?::int[]) and connected_process_id is null and terminated_at is null returning id, name`,
    [now, now, processId, intArray(workerIds)],
  );
  for (const w of rows) events.publish('workerChanged', { id: w.id, name: w.name });
  return rows;
}

/**
 * Writes workers' presence in batches: the connections and disconnections that arrive while one
 * batch is written go together in the next (two statements at most, whatever their number), so that
 * ten thousand agents connecting or going away at once make a few statements, not ten thousand
 * that wait for the database's connections. Each call resolves when its own batch is written, and
 * rejects with that batch's error.
 */
export function createPresenceWriter(write: {
  connected(ids: number[]): Promise<void>;
  disconnected(ids: number[]): Promise<void>;
}): {
  connected(workerId: number): Promise<void>;
  disconnected(workerId: number): Promise<void>;
  /** Resolves when every batch asked for so far is written (or failed). */
  idle(): Promise<void>;
} {
  interface Batch {
    connected: number[];
    disconnected: number[];
    done: Promise<void>;
    start: () => void;
  }
  let next: Batch | null = null;
  let running: Promise<void> = Promise.resolve();
  const batch = (): Batch => {
    if (next) return next;
    let start!: () => void;
    const go = new Promise<void>((r) => (start = r));
    const b: Batch = {
      connected: [],
      disconnected: [],
      start,
      done: go.then(async () => {
        if (next === b) next = null; // later calls start another batch
        // A worker has one write in flight at a time (the caller orders them), so it is in one list only.
        await write.connected(b.connected);
        await write.disconnected(b.disconnected);
      }),
    };
    next = b;
    // It starts when the batch before it is written, collecting meanwhile.
    running = running
      .catch(() => undefined)
      .then(() => {
        b.start();
        return b.done;
      });
    // The batch's failure is its callers' (b.done); the chain must not end the process with an
    // unhandled rejection when no later batch or idle() comes to read it (PostgreSQL restarting while
    // the last workers disconnect did).
    running.catch(() => undefined);
    return b;
  };
  return {
    connected(workerId) {
      const b = batch();
      b.connected.push(workerId);
      return b.done;
    },
    disconnected(workerId) {
      const b = batch();
      b.disconnected.push(workerId);
      return b.done;
    },
    idle: () => running.catch(() => undefined),
  };
}

/**
 * Workers' last connections to the process `processId` closed (or it stops): those it still owns are
 * disconnected and owned by none (one statement). A worker whose agent connected to another process
 * meanwhile is that process's, and stays connected.
 */
export async function markManyDisconnected(
  em: EntityManager,
  events: Events,
  workerIds: readonly number[],
  processId: number,
): Promise<void> {
  if (!workerIds.length) return;
  const rows = await em.execute<{ id: number; name: string }[]>(
    `update worker set connected_at = null, connected_process_id = null
      where id = any(?::int[]) and connected_at is not null and connected_process_id = ? returning id, name`,
    [intArray(workerIds), processId],
  );
  for (const w of rows) events.publish('workerChanged', { id: w.id, name: w.name });
}
