import type { EntityManager } from '@mikro-orm/postgresql';
import type { LaunchingInstance } from '../matching/diagnosis.js';

/**
 * The instances still LAUNCHING (asked of their provider, their worker not yet connected), oldest
 * first: the diagnosis names them instead of counting their workers as disconnected. Bounded by the
 * pools' maxActiveInstances.
 */
export async function launchingInstances(em: EntityManager): Promise<LaunchingInstance[]> {
  const rows = await em.execute<
    { name: string; pool_id: number; worker_id: number | null; requested_at: Date | string }[]
  >(`select name, pool_id, worker_id, requested_at from instance where state = 'LAUNCHING' order by requested_at, id`);
  return rows.map((r) => ({ name: r.name, poolId: r.pool_id, workerId: r.worker_id, since: new Date(r.requested_at) }));
}
