/**
 * Quarantine (docs/design.md: placement quality), the rule: a worker whose last `afterErrors` results are all ERROR, while one
 * of those same tasks has succeeded on another worker since the first of those errors, is taken out of
 * the farm (rules/availability.ts: QUARANTINED) so that it stops eating the queue; a SUCCESS of its own
 * lifts it. The decisions are pure here; storage/quarantine.ts reads the results and writes the
 * worker. Which quarantined workers may be given a probe is rules/availability.ts (mayBeProbed, probeableSql).
 */

/** A result of the worker, newest first. */
export interface RecentResult {
  readonly result: string | null;
  readonly taskName: string;
}

/** A success of one of the same tasks on another worker. */
export interface SuccessElsewhere {
  readonly taskName: string;
  readonly worker: string;
}

/** Whether a completion with this result may quarantine its worker (then its recent results are read); a SUCCESS lifts a quarantine instead. */
export const mayQuarantine = (result: string, afterErrors: number): boolean => result === 'ERROR' && afterErrors > 0;

/** Whether a completion with this result lifts its worker's quarantine. */
export const liftsQuarantine = (result: string): boolean => result === 'SUCCESS';

/** The tasks of the worker's last results when they are `afterErrors` errors (sorted, once each), else null: no quarantine. */
export function erroredTasks(last: readonly RecentResult[], afterErrors: number): string[] | null {
  if (last.length < afterErrors || last.some((r) => r.result !== 'ERROR')) return null;
  return [...new Set(last.map((r) => r.taskName))].sort();
}

/** The reason kept on a quarantined worker (its status and the diagnosis show it). */
export const quarantineReason = (afterErrors: number, tasks: readonly string[], elsewhere: SuccessElsewhere): string =>
  `its last ${afterErrors} results are ERROR (${tasks.join(', ')}) while ${elsewhere.taskName} succeeded on ${elsewhere.worker}`;
