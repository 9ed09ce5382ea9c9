import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray } from '../../db/arrays.js';

/**
 * Quarantine (DESIGN §17): a worker whose last `afterErrors` results are all ERROR, while one of
 * those same tasks has succeeded on another worker since the first of those errors, is taken out of
 * the farm (availability.ts: QUARANTINED) so that it stops eating the queue. The reason is kept on the
 * worker and shown in its status and the diagnosis. An admin lifts it (`unquarantineWorker`), and so
 * does a SUCCESS of the worker itself: work it still held, or a quarantine probe the server gives it
 * (services/quarantine-probes.ts). A probe's success on another worker is no evidence about the tasks.
 */

/** A worker whose quarantine just began or ended (for its workerChanged event). */
export interface QuarantineChange {
  readonly id: number;
  readonly name: string;
}

/**
 * After a completion by `workerId`: with an ERROR, quarantines the worker when the rule holds; with a
 * SUCCESS, lifts its quarantine. Returns the worker when its quarantine changed. Runs in the
 * completion's transaction.
 */
export async function judgeWorker(em: EntityManager, workerId: number, result: string, now: Date, afterErrors: number): Promise<QuarantineChange | null> {
  if (result === 'SUCCESS') {
    const [lifted] = await em.execute<QuarantineChange[]>(
      `update worker set quarantined_at = null, quarantine_reason = null where id = ? and quarantined_at is not null returning id, name`,
      [workerId],
    );
    return lifted ?? null;
  }
  if (result !== 'ERROR' || afterErrors <= 0) return null;
  // The worker's last results, newest first (the history of one worker, through its index).
  const last = await em.execute<{ result: string | null; task_name: string; completed_at: Date | string }[]>(
    `select result, task_name, completed_at from work_request
      where worker_id = ? and status = 'COMPLETED' and result is not null order by completed_at desc, id desc limit ?`,
    [workerId, afterErrors],
  );
  if (last.length < afterErrors || last.some((r) => r.result !== 'ERROR')) return null;
  const tasks = [...new Set(last.map((r) => r.task_name))].sort();
  const since = last[last.length - 1].completed_at;
  const [elsewhere] = await em.execute<{ task_name: string; worker: string }[]>(
    `select r.task_name, w.name as worker from work_request r join worker w on w.id = r.worker_id
      where r.task_name = any(?::text[]) and r.status = 'COMPLETED' and r.result = 'SUCCESS' and r.worker_id <> ? and r.completed_at >= ? and not r.quarantine_probe
      limit 1`,
    [textArray(tasks), workerId, since],
  );
  if (!elsewhere) return null; // the tasks fail everywhere: the work is at fault, not this worker
  const reason = `its last ${afterErrors} results are ERROR (${tasks.join(', ')}) while ${elsewhere.task_name} succeeded on ${elsewhere.worker}`;
  const [entered] = await em.execute<QuarantineChange[]>(`update worker set quarantined_at = ?, quarantine_reason = ? where id = ? and quarantined_at is null returning id, name`, [
    now,
    reason,
    workerId,
  ]);
  return entered ?? null;
}
