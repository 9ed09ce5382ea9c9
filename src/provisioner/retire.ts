/**
 * Retiring pool workers (src/scheduler/rules/instance-retirement.ts) in the provisioner's cycle: the
 * workers whose instances outlived their pool's maximum lifetime, and idle ones of outdated instances
 * (a rollout, a few at a time), are drained (those that reached their
 * pool's request limit were drained by PostgreSQL as the work was assigned), and the retired workers
 * that hold no work are listed for the cycle to stop.
 */
import { isActiveSql } from '../scheduler/rules/active-work.js';
import type { WorkerPool } from '../entities/worker-pool.js';
import { outdatedSql, outlivedSql, replacementRoom, RETIRING_REASONS, retiringText, templateFingerprint, type RetiringReason } from '../scheduler/rules/instance-retirement.js';
import type { CycleContext } from './context.js';
import { INSTANCE_END_REASONS, type InstanceEndReason } from './provisioner-metrics.js';

/** A live instance's worker: only those the provisioner launched (workers started by hand are left to whoever started them). */
const LIVE_INSTANCE_SQL = `exists (select 1 from instance i where i.worker_id = w.id and i.state in ('LAUNCHING', 'RUNNING'))`;

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
      where p.id = w.pool_id and w.terminated_at is null and w.retiring_reason is null and ${LIVE_INSTANCE_SQL}
        and ${outlivedSql('coalesce(w.instance_created_at, w.registered_at)', 'p.max_instance_lifetime_seconds', '?::timestamptz')}
      returning w.id, w.name, p.name as pool`,
    [RETIRING_REASONS.LIFETIME, now],
  );
  for (const r of rows) {
    ctx.events.publish('workerChanged', { id: r.id, name: r.name });
    ctx.log.info({ pool: r.pool, worker: r.name }, 'an instance outlived its pool’s lifetime: it takes no new work and stops once idle');
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
        where i.pool_id = ? and i.state in ('LAUNCHING', 'RUNNING') and w.terminated_at is null`,
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

/** The retired workers with a live instance that hold no work: to stop now. */
export async function retiredIdle(ctx: CycleContext): Promise<{ workerId: number; poolId: number; why: { text: string; reason: InstanceEndReason } }[]> {
  const rows = await ctx.orm.em
    .fork()
    .execute<{ id: number; pool_id: number; reason: RetiringReason; pool: string; max_work_requests_per_instance: number | null; max_instance_lifetime_seconds: number | null }[]>(
      `select w.id, w.pool_id, w.retiring_reason as reason, p.name as pool, p.max_work_requests_per_instance, p.max_instance_lifetime_seconds
       from worker w join worker_pool p on p.id = w.pool_id
      where w.retiring_reason is not null and w.terminated_at is null and ${LIVE_INSTANCE_SQL}
        and not exists (select 1 from work_request a where a.worker_id = w.id and ${isActiveSql('a')})
      order by w.id`,
    );
  return rows.map((r) => ({
    workerId: r.id,
    poolId: r.pool_id,
    why: {
      text: `retired: ${retiringText(r.reason, { name: r.pool, maxWorkRequestsPerInstance: r.max_work_requests_per_instance, maxInstanceLifetimeSeconds: r.max_instance_lifetime_seconds })}`,
      reason: END_REASON[r.reason],
    },
  }));
}
