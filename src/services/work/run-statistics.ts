/**
 * What a run used (shared/run-statistics.ts): checked when the agent reports it with the result,
 * kept once per work request, and read back for WorkRequest.statistics.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { WorkRequestStatisticsSchema, type WorkRequestStatistics } from '../../entities/work-request-statistics.js';
import { ERROR_CODES, InputError } from '../../errors.js';
import { runStatisticsErrors, type RunStatistics } from '../../shared/run-statistics.js';

/** Throws an InputError naming every figure out of bounds. */
export function checkRunStatistics(s: RunStatistics): void {
  const errors = runStatisticsErrors(s);
  if (errors.length) throw InputError.of(errors.map((message) => ({ code: ERROR_CODES.INVALID_INPUT, message, path: 'input.statistics', tag: null })));
}

/** Keeps the figures of a request's run; a request that has some keeps them (a repeated report, a re-run). */
export async function keepRunStatistics(em: EntityManager, workRequestId: number, s: RunStatistics): Promise<void> {
  // em.execute runs in em's transaction, when it has one (the request's row is locked there).
  await em.execute(
    `insert into work_request_statistics (work_request_id, setup_seconds, run_seconds, teardown_seconds, cpu_seconds, peak_memory_bytes, peak_disk_bytes, cpu_count, memory_method)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (work_request_id) do nothing`,
    [workRequestId, s.setupSeconds, s.runSeconds, s.teardownSeconds, s.cpuSeconds, s.peakMemoryBytes, s.peakDiskBytes, s.cpuCount, s.memoryMethod],
  );
}

/** The figures of a request's run, or null when none were reported. */
export async function runStatisticsOf(em: EntityManager, workRequestId: number): Promise<WorkRequestStatistics | null> {
  return em.findOne(WorkRequestStatisticsSchema, { workRequest: workRequestId });
}
