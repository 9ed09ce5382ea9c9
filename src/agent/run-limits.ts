/**
 * What one run may use. On a worker that shares its resources (docs/reference/resources.md) the server sends
 * each assignment's reservation (`runLimits`): the run gets TAGSCHED_PARALLEL from its CPUs, a memory
 * limit on its cgroup from its memory (the smaller of it and `--handler-memory-limit`), and, where the
 * cgroup has the cpu controller (v2), a CPU weight in proportion to its CPUs. On a worker with fixed
 * slots there is no reservation: TAGSCHED_PARALLEL comes from the load (parallelism.ts) and only
 * `--handler-memory-limit` applies.
 */

/** A run's reservation as the server sends it. */
export interface Reservation {
  readonly cpus: number;
  readonly memoryMib: number;
}

const MIB = 2 ** 20;
/** The smallest memory limit a run's cgroup is given (what --handler-memory-limit accepts at least). */
export const MIN_MEMORY_LIMIT_MIB = 4;
/** cgroup v2's cpu.weight: 100 is one CPU's share by default, 10000 the most it takes. */
const CPU_WEIGHT_PER_CPU = 100;
const CPU_WEIGHT_MAX = 10_000;

export interface RunLimits {
  /** TAGSCHED_PARALLEL. */
  readonly parallel: number;
  /** The memory limit of its cgroup, in bytes; null: none. */
  readonly memoryLimitBytes: number | null;
  /** cpu.weight of its cgroup (v2, where the cpu controller is there); null: the default. */
  readonly cpuWeight: number | null;
}

/**
 * The limits of a run: from its reservation when it has one (a reservation of 0 memory sets no limit, of
 * 0 CPUs the default weight and a TAGSCHED_PARALLEL of 1), else the suggested parallelism; the
 * agent's own memory limit (`configuredLimitBytes`) holds in both cases.
 */
export function runLimits(
  reservation: Reservation | null | undefined,
  suggestedParallel: number,
  configuredLimitBytes: number | null,
): RunLimits {
  if (!reservation) return { parallel: suggestedParallel, memoryLimitBytes: configuredLimitBytes, cpuWeight: null };
  const reserved = reservation.memoryMib > 0 ? Math.max(reservation.memoryMib, MIN_MEMORY_LIMIT_MIB) * MIB : null;
  const memoryLimitBytes =
    reserved === null
      ? configuredLimitBytes
      : configuredLimitBytes === null
        ? reserved
        : Math.min(reserved, configuredLimitBytes);
  return {
    parallel: Math.max(1, Math.floor(reservation.cpus)),
    memoryLimitBytes,
    cpuWeight:
      reservation.cpus > 0 ? Math.min(CPU_WEIGHT_MAX, Math.floor(reservation.cpus) * CPU_WEIGHT_PER_CPU) : null,
  };
}
