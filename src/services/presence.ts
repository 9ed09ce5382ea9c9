import type { EntityManager } from '@mikro-orm/postgresql';
import { WorkRequestSchema, type WorkRequest } from '../entities/work-request.js';
import { WorkerSchema, type Worker } from '../entities/worker.js';
import type { Events } from '../events.js';
import { requireWorker, type Viewer } from './auth.js';

/** A worker's agent says it is alive (and, when it is, that it is shutting down). */
export async function heartbeat(
  em: EntityManager,
  viewer: Viewer,
  events: Events,
  input: { shuttingDown?: boolean | null },
): Promise<{ worker: Worker; assigned: WorkRequest[] }> {
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

/** A worker's connection opened: it is connected and seen now; a fresh agent is not shutting down. */
export async function markConnected(em: EntityManager, events: Events, workerId: number): Promise<void> {
  const now = new Date();
  const worker = await em.findOne(WorkerSchema, { id: workerId });
  if (!worker) return;
  worker.connectedAt = now;
  worker.lastSeenAt = now;
  worker.shuttingDown = false;
  await em.flush();
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
