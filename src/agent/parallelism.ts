/**
 * The parallelism suggested to a handler in TAGSCHED_PARALLEL, the N of a build's `-jN`
 * (build farms want it from the load, not from the bare cpu count).
 */

/** What the suggestion depends on, sampled when a handler starts. */
export interface ParallelismInput {
  /** CPUs this process may use (os.availableParallelism()). */
  cpuCount: number;
  /** The 1-minute load average (os.loadavg()[0]); 0 where the platform has none. */
  load1: number;
  /** Handlers running at once on this agent, counting the one being started. */
  running: number;
}

/**
 * `max(1, round((cpus − min(load1, cpus)) / running))`: the CPUs that were idle over the last
 * minute, shared equally among the handlers running at once, and at least one.
 *
 * The load already includes what the other handlers (and anything else on the machine) use, so a
 * second build started next to a `-j8` build on 8 CPUs gets 1, not 4; rounding rather than
 * flooring keeps the usual background load of an idle machine (≈0.2) from costing a whole CPU.
 */
export function suggestedParallelism({ cpuCount, load1, running }: ParallelismInput): number {
  const cpus = Math.max(1, Math.floor(cpuCount));
  const load = Number.isFinite(load1) ? Math.min(Math.max(load1, 0), cpus) : 0;
  const share = (cpus - load) / Math.max(1, Math.floor(running));
  return Math.max(1, Math.round(share));
}
