import type { EntityManager } from '@mikro-orm/postgresql';

/** The worker of an instance connected: the instance is RUNNING (once; its first connection is its start). */
export async function markInstanceRunning(em: EntityManager, workerId: number, now: Date): Promise<void> {
  await em.execute(`update instance set state = 'RUNNING', started_at = ? where worker_id = ? and state = 'LAUNCHING'`, [now, workerId]);
}
