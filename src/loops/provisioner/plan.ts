import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import type { RetiringReason } from '../../scheduler/rules/instance-retirement.js';
import type { ProvisioningDemand } from '../../scheduler/matching/demand-plan.js';

/** What one provisioner cycle does after reconciling: the decisions, before any provider is called. */
export interface CyclePlan {
  /** Instances to launch, per pool, in demand order. */
  readonly launches: { readonly pool: WorkerPool; readonly count: number }[];
  /** Workers to stop, each with a live instance the provisioner can stop at its provider; `retired` says why a retired one is stopped (else: its idle timeout). */
  readonly stops: {
    readonly pool: WorkerPool;
    readonly workerId: number;
    readonly name: string;
    readonly retired: RetiringReason | null;
  }[];
}

/**
 * The decisions of a cycle are the demand's (docs/design.md: pools and instances: the provisioner reads the same numbers as
 * `provisioningDemand`): launch what `launch` says, and stop what `stop` lists, but only workers with
 * a live instance record (those made by hand with a pool-wide activation token are left to whoever
 * started them). Whether a worker is still idle is checked again, under its lock, when it is stopped.
 */
export function planCycle(demand: ProvisioningDemand, workersWithInstances: ReadonlySet<number>): CyclePlan {
  return {
    launches: demand.pools.filter((d) => d.launch > 0).map((d) => ({ pool: d.pool, count: d.launch })),
    stops: demand.pools.flatMap((d) =>
      d.stop
        .filter((w) => workersWithInstances.has(w.id))
        .map((w) => ({ pool: d.pool, workerId: w.id, name: w.name, retired: d.retired.get(w.id) ?? null })),
    ),
  };
}
