/**
 * What a run used (shared/run-statistics.ts): checked when the agent reports it with the result,
 * kept once per work request (and counted in its task's histograms, scheduler/storage/task-statistics.ts),
 * and read back for WorkRequest.statistics.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkRequest } from '../../entities/work-request.js';
import { WorkRequestStatisticsSchema, type WorkRequestStatistics } from '../../entities/work-request-statistics.js';
import { ERROR_CODES, InputError } from '../../errors.js';
import { histogramParams, histogramsCteSql } from '../../scheduler/storage/task-statistics.js';
import { runStatisticsErrors, type RunStatistics } from '../../shared/run-statistics.js';
import { statisticsKeyOf } from '../../tasks/statistics-key.js';

/** Throws an InputError naming every figure out of bounds. */
export function checkRunStatistics(s: RunStatistics): void {
  const errors = runStatisticsErrors(s);
  if (errors.length) throw InputError.of(errors.map((message) => ({ code: ERROR_CODES.INVALID_INPUT, message, path: 'input.statistics', tag: null })));
}

/**
 * Keeps the figures of a request's run, and counts them in the histograms of its task (and of its task,
 * package and architecture) in the same statement: a request that has figures keeps them (a repeated
 * report, a re-run) and is not counted again.
 */
export async function keepRunStatistics(em: EntityManager, wr: WorkRequest, s: RunStatistics): Promise<void> {
  const key = statisticsKeyOf(wr.taskType, wr.taskName, wr.providedEntries, wr.requiredEntries);
  // em.execute runs in em's transaction, when it has one (the request's row is locked there).
  await em.execute(
    `with kept as (
       insert into work_request_statistics (work_request_id, setup_seconds, run_seconds, teardown_seconds, cpu_seconds, peak_memory_bytes, peak_disk_bytes, cpu_count, memory_method, out_of_memory, disk_full, memory_limit_bytes)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict (work_request_id) do nothing
       returning work_request_id, run_seconds, peak_memory_bytes, peak_disk_bytes, out_of_memory, disk_full, memory_limit_bytes
     ), run as (select k.*, r.worker_id from kept k join work_request r on r.id = k.work_request_id),
     ${histogramsCteSql('run')}
     select 1`,
    [
      wr.id,
      s.setupSeconds,
      s.runSeconds,
      s.teardownSeconds,
      s.cpuSeconds,
      s.peakMemoryBytes,
      s.peakDiskBytes,
      s.cpuCount,
      s.memoryMethod,
      s.outOfMemory ?? null,
      s.diskFull ?? null,
      s.memoryLimitBytes ?? null,
      ...histogramParams(key),
    ],
  );
}

/** The figures of a request's run, or null when none were reported. */
export async function runStatisticsOf(em: EntityManager, workRequestId: number): Promise<WorkRequestStatistics | null> {
  return em.findOne(WorkRequestStatisticsSchema, { workRequest: workRequestId });
}
