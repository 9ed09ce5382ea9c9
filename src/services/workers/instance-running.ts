import type { EntityManager } from '@mikro-orm/postgresql';

/** The weight of the newest launch in a pool's measured launch time (worker_pool.launch_seconds), an exponentially weighted mean. */
export const LAUNCH_SECONDS_WEIGHT = 0.2;

/**
 * The worker of an instance connected: the instance is RUNNING (once; its first connection is its
 * start), and its pool's measured launch time takes in this launch (from its request to now), in the
 * same statement.
 */
export async function markInstanceRunning(em: EntityManager, workerId: number, now: Date): Promise<void> {
  await em.execute(
    `with started as (
       update instance set state = 'RUNNING', started_at = ? where worker_id = ? and state = 'LAUNCHING'
       returning pool_id, greatest(0, extract(epoch from (started_at - requested_at)))::float8 as seconds
     )
     update worker_pool p
        set launch_seconds = case when p.launch_seconds is null then s.seconds else p.launch_seconds + ? * (s.seconds - p.launch_seconds) end,
            launch_samples = p.launch_samples + 1
       from started s where p.id = s.pool_id`,
    [now, workerId, LAUNCH_SECONDS_WEIGHT],
  );
}
