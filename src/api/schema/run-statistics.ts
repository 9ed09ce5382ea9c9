/** What a run used: the agent's report with the result (CompleteWorkRequestInput.statistics) and WorkRequest.statistics. */
import { builder } from '../builder.js';
import type { WorkRequestStatistics } from '../../storage/entities/work-request-statistics.js';
import { runStatisticsOf } from '../../services/work/run-statistics.js';
import { RUN_STATISTICS_LIMITS, type MemoryMethod, type RunStatistics } from '../../shared/run-statistics.js';
import { describedValues } from './enum-values.js';
import { WorkRequestRef } from './work-request.js';

export const MemoryMethodEnum = builder.enumType('MemoryMeasurement', {
  description: 'How the peak memory of a run was measured',
  values: describedValues<MemoryMethod>({
    PROCESS_TREE:
      "The resident sets of the handler's processes, summed and sampled from /proc (shared pages count once per process)",
    CGROUP_V2:
      "The kernel's peak (memory.peak) of the run's own cgroup v2 memory controller: every page the handler's processes were charged for, the page cache of the files they wrote included",
    CGROUP_V1:
      "The kernel's peak (memory.max_usage_in_bytes) of the run's own cgroup v1 memory controller: every page the handler's processes were charged for, the page cache of the files they wrote included",
  }),
});

const { maxSeconds, maxCpuSeconds, maxBytes, maxCpuCount } = RUN_STATISTICS_LIMITS;

export const RunStatisticsInput = builder.inputType('RunStatisticsInput', {
  description: `What a run used, as the agent measured it. Seconds are at most ${maxSeconds} (CPU time ${maxCpuSeconds}), bytes at most ${maxBytes}`,
  fields: (f) => ({
    setupSeconds: f.float({ required: true, description: "From the acknowledgement to the handler's start" }),
    runSeconds: f.float({ required: true, description: "The handler's run, from its start to its exit" }),
    teardownSeconds: f.float({
      required: true,
      description: "From the handler's exit to the result being ready (the rest of the output sent)",
    }),
    cpuSeconds: f.float({
      description: 'User and system CPU time of the handler and what it waited for; omitted when unknown',
    }),
    peakMemoryBytes: f.float({ description: "Peak memory of the handler's processes; omitted when unknown" }),
    peakDiskBytes: f.float({ description: "Peak bytes allocated in the run's directory; omitted when unknown" }),
    cpuCount: f.int({ required: true, description: `The worker's CPUs (1 to ${maxCpuCount})` }),
    memoryMethod: f.field({ type: MemoryMethodEnum, required: true, description: 'How peakMemoryBytes was measured' }),
    outOfMemory: f.boolean({ description: 'The handler was killed by the out-of-memory killer; omitted when unknown' }),
    diskFull: f.boolean({ description: 'The run hit a full disk; omitted when unknown' }),
    memoryLimitBytes: f.float({
      description: "The memory limit the agent applied to the run's cgroup (--handler-memory-limit); omitted: none",
    }),
  }),
});

/** The input as the services take it: every optional figure null when omitted. */
export function runStatisticsOfInput(input: {
  setupSeconds: number;
  runSeconds: number;
  teardownSeconds: number;
  cpuSeconds?: number | null;
  peakMemoryBytes?: number | null;
  peakDiskBytes?: number | null;
  cpuCount: number;
  memoryMethod: MemoryMethod;
  outOfMemory?: boolean | null;
  diskFull?: boolean | null;
  memoryLimitBytes?: number | null;
}): RunStatistics {
  return {
    ...input,
    cpuSeconds: input.cpuSeconds ?? null,
    peakMemoryBytes: input.peakMemoryBytes ?? null,
    peakDiskBytes: input.peakDiskBytes ?? null,
    outOfMemory: input.outOfMemory ?? null,
    diskFull: input.diskFull ?? null,
    memoryLimitBytes: input.memoryLimitBytes ?? null,
  };
}

const WorkRequestStatisticsRef = builder.objectRef<WorkRequestStatistics>('WorkRequestStatistics').implement({
  description:
    "What the request's run used, as its agent reported it with the result, each figure bounded by what its worker offers (memory, disk, CPU time by run time × CPUs)",
  fields: (t) => ({
    setupSeconds: t.float({
      description: "Wall time from the acknowledgement to the handler's start",
      resolve: (s) => Number(s.setupSeconds),
    }),
    runSeconds: t.float({ description: "Wall time of the handler's run", resolve: (s) => Number(s.runSeconds) }),
    teardownSeconds: t.float({
      description: "Wall time from the handler's exit to the result being ready",
      resolve: (s) => Number(s.teardownSeconds),
    }),
    cpuSeconds: t.float({
      nullable: true,
      description: 'User and system CPU time; null when unknown',
      resolve: (s) => (s.cpuSeconds == null ? null : Number(s.cpuSeconds)),
    }),
    peakMemoryBytes: t.float({
      nullable: true,
      description: "Peak memory of the handler's processes; null when unknown",
      resolve: (s) => s.peakMemoryBytes ?? null,
    }),
    peakDiskBytes: t.float({
      nullable: true,
      description: "Peak bytes allocated in the run's directory; null when unknown",
      resolve: (s) => s.peakDiskBytes ?? null,
    }),
    cpuCount: t.exposeInt('cpuCount', { description: "The worker's CPUs when it ran" }),
    memoryMethod: t.field({
      type: MemoryMethodEnum,
      description: 'How peakMemoryBytes was measured',
      resolve: (s) => s.memoryMethod as MemoryMethod,
    }),
    outOfMemory: t.boolean({
      nullable: true,
      description: 'The handler was killed by the out-of-memory killer; null when the agent did not say',
      resolve: (s) => s.outOfMemory ?? null,
    }),
    diskFull: t.boolean({
      nullable: true,
      description: 'The run hit a full disk; null when the agent did not say',
      resolve: (s) => s.diskFull ?? null,
    }),
    memoryLimitBytes: t.float({
      nullable: true,
      description:
        "The memory limit the agent applied to the run's cgroup; null: none (an out-of-memory kill under one counts as needing that much)",
      resolve: (s) => s.memoryLimitBytes ?? null,
    }),
    recordedAt: t.field({ type: 'DateTime', description: 'When the report was kept', resolve: (s) => s.recordedAt }),
  }),
});

builder.objectField(WorkRequestRef, 'statistics', (t) =>
  t.field({
    type: WorkRequestStatisticsRef,
    nullable: true,
    description:
      'What its run used (wall time by phase, CPU time, peak memory and disk), as its agent reported it; null until an agent did',
    resolve: (w, _args, ctx) => runStatisticsOf(ctx.em, w.id),
  }),
);
