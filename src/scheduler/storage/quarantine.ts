import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray } from '../../storage/db/arrays.js';
import { erroredTasks, liftsQuarantine, mayQuarantine, quarantineReason } from '../rules/quarantine.js';

/**
 * Quarantine (rules/quarantine.ts) in the database: the worker's recent results and the successes
 * elsewhere read, its quarantine entered or lifted. An admin lifts it too (`unquarantineWorker`), and
 * so does a SUCCESS of the worker itself: work it still held, or a quarantine probe the server gives it
 * (services/work/quarantine-probes.ts). A probe's success on another worker is no evidence about the tasks.
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
export async function judgeWorker(
  em: EntityManager,
  workerId: number,
  result: string,
  now: Date,
  afterErrors: number,
): Promise<QuarantineChange | null> {
  if (liftsQuarantine(result)) {
    const [lifted] = await em.execute<QuarantineChange[]>(
      `update worker set quarantined_at = null, quarantine_reason = null where id = ? and quarantined_at is not null returning id, name`,
      [workerId],
    );
    return lifted ?? null;
  }
  if (!mayQuarantine(result, afterErrors)) return null;
  // The worker's last results, newest first (the history of one worker, through its index).
  const last = await em.execute<{ result: string | null; task_name: string; completed_at: Date | string }[]>(
    `select result, task_name, completed_at from work_request
      where worker_id = ? and status = 'COMPLETED' and result is not null order by completed_at desc, id desc limit ?`,
    [workerId, afterErrors],
  );
  const tasks = erroredTasks(
    last.map((r) => ({ result: r.result, taskName: r.task_name })),
    afterErrors,
  );
  if (!tasks) return null;
  const since = last[last.length - 1].completed_at;
  const [elsewhere] = await em.execute<{ task_name: string; worker: string }[]>(
    `select r.task_name, w.name as worker from work_request r join worker w on w.id = r.worker_id
      where r.task_name = any(?::text[]) and r.status = 'COMPLETED' and r.result = 'SUCCESS' and r.worker_id <> ? and r.completed_at >= ? and not r.quarantine_probe
      limit 1`,
    [textArray(tasks), workerId, since],
  );
  if (!elsewhere) return null; // the tasks fail everywhere: the work is at fault, not this worker
  const reason = quarantineReason(afterErrors, tasks, { taskName: elsewhere.task_name, worker: elsewhere.worker });
  const [entered] = await em.execute<QuarantineChange[]>(
    `update worker set quarantined_at = ?, quarantine_reason = ? where id = ? and quarantined_at is null returning id, name`,
    [now, reason, workerId],
  );
  return entered ?? null;
}
