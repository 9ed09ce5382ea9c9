import type { PoolSpecifications } from '../../tags/worker-tags.js';

/** The concurrency of a pool's workers (docs/design.md: pools and instances): its specifications', 1 when unset. */
export function poolConcurrency(specifications: PoolSpecifications): number {
  const n = specifications.concurrency;
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 ? n : 1;
}
