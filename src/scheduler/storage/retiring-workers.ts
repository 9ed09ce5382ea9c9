import type { EntityManager } from '@mikro-orm/postgresql';
import { LAUNCHING_OR_RUNNING_SQL } from '../../core/instance-state.js';
import { retiredToStopSql, type RetiringReason } from '../rules/instance-retirement.js';

/**
 * Whether the worker under `w` has an instance that is LAUNCHING or RUNNING: only those retire and are
 * stopped (workers made by hand with a pool-wide token are left to whoever started them).
 */
export const launchingOrRunningInstanceSql = (w: string) =>
  `exists (select 1 from instance i where i.worker_id = ${w}.id and i.state in (${LAUNCHING_OR_RUNNING_SQL}))`;

/** A retiring worker (rules/instance-retirement.ts) with a launching or running instance, as demand and the provisioner read it. */
export interface RetiringWorker {
  readonly workerId: number;
  readonly poolId: number;
  readonly reason: RetiringReason;
  /** It holds no work: to stop now (rules/instance-retirement.ts: retiredToStop). */
  readonly toStop: boolean;
  /** Its pool's name and limits, for the words of its reason (retiringText). */
  readonly pool: {
    readonly name: string;
    readonly maxWorkRequestsPerInstance: number | null;
    readonly maxInstanceLifetimeSeconds: number | null;
  };
}

/**
 * Every retiring worker that is not terminated and has a launching or running instance, in id order, in one statement:
 * a retiring worker is draining, so the narrow copy `worker_state` (its draining flag) selects the few
 * before their rows are read.
 */
export async function retiringWorkers(em: EntityManager): Promise<RetiringWorker[]> {
  const rows = await em.execute<
    {
      id: number;
      pool_id: number;
      reason: RetiringReason;
      to_stop: boolean;
      pool: string;
      max_work_requests_per_instance: number | null;
      max_instance_lifetime_seconds: number | null;
    }[]
  >(
    `select w.id, w.pool_id, w.retiring_reason as reason, ${retiredToStopSql('w')} as to_stop,
            p.name as pool, p.max_work_requests_per_instance, p.max_instance_lifetime_seconds
       from worker_state s
       join worker w on w.id = s.worker_id
       join worker_pool p on p.id = w.pool_id
      where s.draining and s.terminated_at is null and w.retiring_reason is not null and w.terminated_at is null and ${launchingOrRunningInstanceSql('w')}
      order by w.id`,
  );
  return rows.map((r) => ({
    workerId: r.id,
    poolId: r.pool_id,
    reason: r.reason,
    toStop: r.to_stop,
    pool: {
      name: r.pool,
      maxWorkRequestsPerInstance: r.max_work_requests_per_instance,
      maxInstanceLifetimeSeconds: r.max_instance_lifetime_seconds,
    },
  }));
}
