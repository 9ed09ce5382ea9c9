import type { WorkerPool } from '../../storage/entities/worker-pool.js';

/**
 * Where a pool's instances are launched, listed and stopped. A pool of a cloud provider (exec,
 * hetzner, ec2) runs on any host: its machines are reached through the provider's API from anywhere.
 * A pool of a host-bound provider (local, qemu: providers/registry.ts, hostBound) runs only on the
 * host it names (`pool.host`, compared with the process's TAGSCHED_HOST_NAME); one with no host (made
 * before pools kept one) runs on any host, as every pool did then.
 */
export function poolRunsOn(pool: Pick<WorkerPool, 'host'>, providerHostBound: boolean, hostName: string): boolean {
  if (!providerHostBound || pool.host == null) return true;
  return pool.host === hostName;
}
