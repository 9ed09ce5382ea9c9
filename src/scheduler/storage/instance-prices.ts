import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../storage/db/arrays.js';
import { instancePriceSql } from '../rules/pool-cost.js';

/** What a worker's share of its instance's cost is reckoned from (rules/pool-cost.ts: workRequestCost). */
export interface WorkerPrice {
  /** Its instance's price per hour (rules/pool-cost.ts: instancePrice); null when none is known. */
  readonly pricePerHour: number | null;
  readonly concurrency: number;
}

/** The price per hour of each worker's instance and the worker's concurrency, by worker id, in one statement; workers without an instance are left out. */
export async function workerPrices(em: EntityManager, workerIds: readonly number[]): Promise<Map<number, WorkerPrice>> {
  if (!workerIds.length) return new Map();
  const rows = await em.execute<{ worker_id: number; price: number | null; concurrency: number }[]>(
    `select w.id as worker_id, ${instancePriceSql('i', 'p')}::float as price, w.concurrency
       from worker w
       join instance i on i.worker_id = w.id
       join worker_pool p on p.id = i.pool_id
      where w.id = any(?::int[])`,
    [intArray(workerIds)],
  );
  return new Map(
    rows.map((r) => [
      r.worker_id,
      { pricePerHour: r.price == null ? null : Number(r.price), concurrency: r.concurrency },
    ]),
  );
}
