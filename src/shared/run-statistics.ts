/**
 * What one run used, as the agent measures it and the server keeps it (WorkRequest.statistics):
 * the shape both sides use, the bounds the server checks, and the one check.
 */

/**
 * How peak memory was measured: `PROCESS_TREE` sums the resident sets of the handler's processes,
 * sampled from /proc; `CGROUP_V2` and `CGROUP_V1` read the kernel's peak of the run's own memory
 * cgroup (`memory.peak`, `memory.max_usage_in_bytes`), which counts every page the handler's
 * processes were charged for, the page cache of the files they wrote included.
 */
export const MEMORY_METHODS = ['PROCESS_TREE', 'CGROUP_V2', 'CGROUP_V1'] as const;
export type MemoryMethod = (typeof MEMORY_METHODS)[number];

/** How each method is named to a reader (status pages, tagsched-admin). */
export const MEMORY_METHOD_LABELS: Record<MemoryMethod, string> = {
  PROCESS_TREE: 'process tree',
  CGROUP_V2: 'cgroup v2',
  CGROUP_V1: 'cgroup v1',
};

/** One run's figures; a figure the agent could not measure is null. */
export interface RunStatistics {
  /** From the acknowledgement to the handler's start (the agent preparing the run), in seconds. */
  setupSeconds: number;
  /** The handler's own run, from its start to its exit, in seconds. */
  runSeconds: number;
  /** From the handler's exit to the result being ready (the rest of the output sent, the reason read), in seconds. */
  teardownSeconds: number;
  /** User and system CPU time of the handler and everything it waited for, in seconds. */
  cpuSeconds: number | null;
  peakMemoryBytes: number | null;
  /** Peak of the bytes allocated in the run's directory. */
  peakDiskBytes: number | null;
  /** The CPUs of the worker, as the agent saw them. */
  cpuCount: number;
  memoryMethod: MemoryMethod;
  /** The kernel's OOM killer killed a process of the run; null or absent when unknown. */
  outOfMemory?: boolean | null;
  /** The memory limit the agent applied to the run's cgroup (--handler-memory-limit), in bytes; null or absent: none. */
  memoryLimitBytes?: number | null;
  /** The run directory's file system was full (or nearly) during the run; null or absent when unknown. */
  diskFull?: boolean | null;
}

/** The largest figures the server keeps: a longer run or a bigger machine is a mistake or a lie. */
export const RUN_STATISTICS_LIMITS = {
  /** A year. */
  maxSeconds: 366 * 24 * 3600,
  /** 1024 CPUs busy for a year. */
  maxCpuSeconds: 1024 * 366 * 24 * 3600,
  /** 1 PiB. */
  maxBytes: 2 ** 50,
  maxCpuCount: 65_536,
} as const;

/** Why `s` cannot be kept (one message per figure), or nothing. */
export function runStatisticsErrors(s: RunStatistics): string[] {
  const errors: string[] = [];
  const check = (name: keyof RunStatistics, value: number | null, max: number, integer = false) => {
    if (value === null) return;
    if (
      typeof value !== 'number' ||
      !Number.isFinite(value) ||
      value < 0 ||
      value > max ||
      (integer && !Number.isInteger(value))
    ) {
      errors.push(`statistics.${name} must be ${integer ? 'a whole number' : 'a number'} from 0 to ${max}`);
    }
  };
  const { maxSeconds, maxCpuSeconds, maxBytes, maxCpuCount } = RUN_STATISTICS_LIMITS;
  check('setupSeconds', s.setupSeconds, maxSeconds);
  check('runSeconds', s.runSeconds, maxSeconds);
  check('teardownSeconds', s.teardownSeconds, maxSeconds);
  check('cpuSeconds', s.cpuSeconds, maxCpuSeconds);
  check('peakMemoryBytes', s.peakMemoryBytes, maxBytes, true);
  check('peakDiskBytes', s.peakDiskBytes, maxBytes, true);
  check('memoryLimitBytes', s.memoryLimitBytes ?? null, maxBytes, true);
  check('cpuCount', s.cpuCount, maxCpuCount, true);
  if (s.cpuCount < 1) errors.push('statistics.cpuCount must be at least 1');
  for (const name of ['outOfMemory', 'diskFull'] as const) {
    const value = s[name];
    if (value !== undefined && value !== null && typeof value !== 'boolean')
      errors.push(`statistics.${name} must be true, false or null`);
  }
  if (!(MEMORY_METHODS as readonly string[]).includes(s.memoryMethod))
    errors.push(`statistics.memoryMethod must be one of ${MEMORY_METHODS.join(', ')}`);
  return errors;
}
