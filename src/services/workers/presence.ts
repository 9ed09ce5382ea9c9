import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../db/arrays.js';
import { WorkRequestSchema, type WorkRequest } from '../../entities/work-request.js';
import { WorkerSchema, type Worker } from '../../entities/worker.js';
import type { Events } from '../../events.js';
import { markInstanceRunning } from './instance-running.js';
import { requireWorker, type Viewer } from '../identity/auth.js';

/** A worker's agent says it is alive (and, when it is, that it is shutting down). */
export async function heartbeat(em: EntityManager, viewer: Viewer, events: Events, input: { shuttingDown?: boolean | null }): Promise<{ worker: Worker; assigned: WorkRequest[] }> {
  const me = requireWorker(viewer);
  const worker = await em.findOneOrFail(WorkerSchema, { id: me.id });
  const now = new Date();
  const wasShuttingDown = worker.shuttingDown;
  worker.lastSeenAt = now;
  worker.connectedAt ??= now;
  if (input.shuttingDown != null) worker.shuttingDown = input.shuttingDown;
  await em.flush();
  if (wasShuttingDown !== worker.shuttingDown) events.publish('workerChanged', { id: worker.id, name: worker.name });
  // Assignments it has not acknowledged: a safety net for a push lost while the connection was down.
  const assigned = await em.find(WorkRequestSchema, { worker: worker.id, status: 'ASSIGNED' }, { orderBy: { assignedAt: 'asc', id: 'asc' } });
  return { worker, assigned };
}

/** A worker's connection opened: it is connected and seen now; a fresh agent is not shutting down; its instance, if any, is RUNNING. */
export async function markConnected(em: EntityManager, events: Events, workerId: number): Promise<void> {
  const now = new Date();
  const worker = await em.findOne(WorkerSchema, { id: workerId });
  if (!worker) return;
  worker.connectedAt = now;
  worker.lastSeenAt = now;
  worker.shuttingDown = false;
  await em.flush();
  if (worker.pool) await markInstanceRunning(em, worker.id, now);
  events.publish('workerChanged', { id: worker.id, name: worker.name });
}

/** A worker's last connection to this process closed. */
export async function markDisconnected(em: EntityManager, events: Events, workerId: number): Promise<void> {
  const worker = await em.findOne(WorkerSchema, { id: workerId });
  if (!worker) return;
  worker.connectedAt = null;
  await em.flush();
  events.publish('workerChanged', { id: worker.id, name: worker.name });
}

/** This process stops: the workers whose connections it held are disconnected (one statement). */
export async function markManyDisconnected(em: EntityManager, events: Events, workerIds: readonly number[]): Promise<void> {
  if (!workerIds.length) return;
  const rows = await em.execute<{ id: number; name: string }[]>(`update worker set connected_at = null where id = any(?::int[]) and connected_at is not null returning id, name`, [
    intArray(workerIds),
  ]);
  for (const w of rows) events.publish('workerChanged', { id: w.id, name: w.name });
}
