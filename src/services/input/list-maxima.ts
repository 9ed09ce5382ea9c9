/**
 * The most rows some lists of the API can hold, enforced where they are written and read by the cost
 * model (src/api/limits/list-bounds.ts), which multiplies what their items select by them.
 */
export const LIST_MAXIMA = {
  /** Rules of one workspace, and site rules (createTaskRule). */
  rulesPerWorkspace: 50,
  /** Members of one workspace (setWorkspaceMember). */
  membersPerWorkspace: 100,
  /** Members of one group (addGroupMembers). */
  membersPerGroup: 100,
  /** A worker's concurrency (registerWorker, setWorkerStaticMetadata, pool specifications). */
  workerConcurrency: 1024,
  /** Server processes, and the leases of their duties, in one answer (Query.serverProcesses, Query.leaders). */
  processesShown: 500,
  /** Worker pools in one answer: a page of workerPools, the pools of provisioningDemand. */
  poolsShown: 200,
  /** PoolDemand.stopWorkers: idle workers to stop, per pool, shown in one answer (the provisioner itself stops them all). */
  stopWorkersShown: 20,
  /** WorkerImage.publications shown in one answer: one per provider and region (EC2 has about 35 regions). */
  publicationsShown: 100,
} as const;
