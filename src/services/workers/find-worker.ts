import type { EntityManager } from '@mikro-orm/postgresql';
import { WorkerSchema, type Worker } from '../../storage/entities/worker.js';
import { NotFoundError } from '../../core/errors.js';

/** Finds a worker by name (typed not-found error). */
export async function findWorker(em: EntityManager, name: string, path = 'name'): Promise<Worker> {
  const worker = await em.findOne(WorkerSchema, { name });
  if (!worker) throw new NotFoundError(`${path}: no worker "${name}"`, path);
  return worker;
}
