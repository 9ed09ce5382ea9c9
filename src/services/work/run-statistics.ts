/**
 * What a run used (shared/run-statistics.ts): checked when the agent reports it with the result,
 * kept once per work request, bounded by what its worker offers (and counted in its task's aggregates,
 * scheduler/storage/task-statistics.ts), and read back for WorkRequest.statistics.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkRequest } from '../../storage/entities/work-request.js';
import {
  WorkRequestStatisticsSchema,
  type WorkRequestStatistics,
} from '../../storage/entities/work-request-statistics.js';
import { ERROR_CODES, InputError } from '../../core/errors.js';
import { RECORD_RUN_SQL, recordRunParams } from '../../scheduler/storage/task-statistics.js';
import { runStatisticsErrors, type RunStatistics } from '../../shared/run-statistics.js';
import { statisticsKeyOf } from '../../core/tasks/statistics-key.js';

/** Throws an InputError naming every figure out of bounds. */
export function checkRunStatistics(s: RunStatistics): void {
  const errors = runStatisticsErrors(s);
  if (errors.length)
    throw InputError.of(
      errors.map((message) => ({ code: ERROR_CODES.INVALID_INPUT, message, path: 'input.statistics', tag: null })),
    );
}

/**
 * Keeps the figures of a request's run, bounded by what its worker offers, and counts them in the
 * aggregates of its task (and of its task, package and architecture) in the same statement
 * (scheduler/storage/task-statistics.ts, RECORD_RUN_SQL): a request that has figures keeps them (a
 * repeated report, a re-run) and is not counted again.
 */
export async function keepRunStatistics(em: EntityManager, wr: WorkRequest, s: RunStatistics): Promise<void> {
  const key = statisticsKeyOf(wr.taskType, wr.taskName, wr.providedEntries, wr.requiredEntries);
  // em.execute runs in em's transaction, when it has one (the request's row is locked there).
  await em.execute(RECORD_RUN_SQL, recordRunParams(wr.id, s, key));
}

/** The figures of a request's run, or null when none were reported. */
export async function runStatisticsOf(em: EntityManager, workRequestId: number): Promise<WorkRequestStatistics | null> {
  return em.findOne(WorkRequestStatisticsSchema, { workRequest: workRequestId });
}
