/**
 * Retiring pool workers (src/scheduler/rules/instance-retirement.ts) in the provisioner's cycle: the
 * workers whose instances outlived their pool's maximum lifetime, and idle ones of outdated instances
 * (a rollout, a few at a time), are drained (those that reached their
 * pool's request limit were drained by PostgreSQL as the work was assigned), and the retired workers
 * that hold no work are listed for the cycle to stop. These steps run with the provisioner off too
 * (cycle.ts: a process with TAGSCHED_PROVISIONER=off runs only them), so that a site's own script
 * sees every retirement: the worker DRAINING, then its instance STOPPING.
 */
import { LAUNCHING_OR_RUNNING_SQL } from '../../core/instance-state.js';
import { isActiveSql } from '../../scheduler/rules/active-work.js';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import {
  outdatedSql,
  outlivedSql,
  replacementRoom,
  RETIRING_REASONS,
  retiringText,
  templateFingerprint,
  type RetiringReason,
} from '../../scheduler/rules/instance-retirement.js';
import { launchingOrRunningInstanceSql, retiringWorkers } from '../../scheduler/storage/retiring-workers.js';
import type { CycleContext } from './context.js';
import { INSTANCE_END_REASONS, type InstanceEndReason } from './provisioner-metrics.js';

/** The worker of a launching or running instance: only those launched by the provisioner or a site's script (workers started by hand with a pool-wide token are left to whoever started them). */
const HAS_INSTANCE_SQL = launchingOrRunningInstanceSql('w');

const END_REASON: Record<RetiringReason, InstanceEndReason> = {
  WORK_REQUESTS: INSTANCE_END_REASONS.WORK_REQUESTS,
  LIFETIME: INSTANCE_END_REASONS.LIFETIME,
  OUTDATED: INSTANCE_END_REASONS.OUTDATED,
};

/** Drains the pool workers whose instances outlived their pool's lifetime; each is published as changed. */
export async function retireOutlived(ctx: CycleContext, now: Date): Promise<void> {
  const rows = await ctx.orm.em.fork().execute<{ id: number; name: string; pool: string }[]>(
    `update worker w set draining = true, retiring_reason = ?
       from worker_pool p
      where p.id = w.pool_id and w.terminated_at is null and w.retiring_reason is null and ${HAS_INSTANCE_SQL}
        and ${outlivedSql('coalesce(w.instance_created_at, w.registered_at)', 'p.max_instance_lifetime_seconds', '?::timestamptz')}
      returning w.id, w.name, p.name as pool`,
    [RETIRING_REASONS.LIFETIME, now],
  );
  for (const r of rows) {
    ctx.events.publish('workerChanged', { id: r.id, name: r.name });
    ctx.log.info(
      { pool: r.pool, worker: r.name },
      'an instance outlived its pool’s lifetime: it takes no new work and stops once idle',
    );
  }
}

/**
 * Drains idle workers whose instances were launched from older specifications than their pool has now
 * (an image rollout), at most `maxReplacingInstances` of a pool at a time with those already retiring
 * for it and the pool's instances still launching. Instances recorded without a fingerprint are left as they are.
 */
export async function retireOutdated(ctx: CycleContext, pools: readonly WorkerPool[]): Promise<void> {
  const em = ctx.orm.em.fork();
  for (const pool of pools) {
    const fingerprint = templateFingerprint(pool);
    const [c] = await em.execute<{ outdated: number; retiring: number; launching: number }[]>(
      `select count(*) filter (where i.state = 'RUNNING' and ${outdatedSql('i.template_fingerprint')} and w.retiring_reason is null)::int as outdated,
              count(*) filter (where w.retiring_reason = ?)::int as retiring,
              count(*) filter (where i.state = 'LAUNCHING')::int as launching
         from instance i join worker w on w.id = i.worker_id
        where i.pool_id = ? and i.state in (${LAUNCHING_OR_RUNNING_SQL}) and w.terminated_at is null`,
      [fingerprint, RETIRING_REASONS.OUTDATED, pool.id],
    );
    const room = replacementRoom(pool.maxReplacingInstances, c.retiring, c.launching);
    if (!c.outdated || !room) continue;
    const rows = await em.execute<{ id: number; name: string }[]>(
      `update worker w set draining = true, retiring_reason = ?
        where w.id in (
          select w2.id from instance i join worker w2 on w2.id = i.worker_id
           where i.pool_id = ? and i.state = 'RUNNING' and ${outdatedSql('i.template_fingerprint')} and w2.terminated_at is null and w2.retiring_reason is null
             and not exists (select 1 from work_request a where a.worker_id = w2.id and ${isActiveSql('a')})
           order by i.id limit ?
           for update of w2 skip locked)
        returning w.id, w.name`,
      [RETIRING_REASONS.OUTDATED, pool.id, fingerprint, room],
    );
    for (const r of rows) {
      ctx.events.publish('workerChanged', { id: r.id, name: r.name });
      ctx.log.info({ pool: pool.name, worker: r.name }, 'an idle instance is outdated: it is replaced');
    }
  }
}

/** Why a retired worker is stopped, in the worker's record, the log and the metrics. */
export function retiredWhy(
  reason: RetiringReason,
  pool: Parameters<typeof retiringText>[1],
): { text: string; reason: InstanceEndReason } {
  return { text: `retired: ${retiringText(reason, pool)}`, reason: END_REASON[reason] };
}

/**
 * The retired workers with a live instance that hold no work (scheduler/storage/retiring-workers.ts,
 * the rule retiredToStop): to stop now. A retiring worker an admin undrained is not among them while it is not draining.
 */
export async function retiredIdle(
  ctx: CycleContext,
): Promise<{ workerId: number; poolId: number; why: { text: string; reason: InstanceEndReason } }[]> {
  const rows = await retiringWorkers(ctx.orm.em.fork());
  return rows
    .filter((r) => r.toStop)
    .map((r) => ({ workerId: r.workerId, poolId: r.poolId, why: retiredWhy(r.reason, r.pool) }));
}
