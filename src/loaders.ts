import type { EntityManager } from '@mikro-orm/postgresql';
import DataLoader from 'dataloader';

/** Per-operation batch loaders for values that are not objects of the schema (objects use Pothos loadable refs). */
export interface Loaders {
  /** Number of ASSIGNED or RUNNING work requests per worker id. */
  readonly activeWorkCount: DataLoader<number, number>;
  /** The ids a work request depends on, per work request id. */
  readonly dependencyIds: DataLoader<number, number[]>;
}

const intArray = (ids: readonly number[]) => `{${ids.join(',')}}`;

/** Creates fresh loaders for one operation. */
export function createLoaders(em: EntityManager): Loaders {
  return {
    activeWorkCount: new DataLoader(async (ids) => {
      const rows = await em.execute<{ worker_id: number; n: number }[]>(
        `select worker_id, count(*)::int as n from work_request
          where worker_id = any(?::int[]) and status in ('ASSIGNED', 'RUNNING') group by worker_id`,
        [intArray(ids)],
      );
      const byId = new Map(rows.map((r) => [r.worker_id, r.n]));
      return ids.map((id) => byId.get(id) ?? 0);
    }),
    dependencyIds: new DataLoader(async (ids) => {
      const rows = await em.execute<{ work_request_id: number; depends_on_id: number }[]>(
        'select work_request_id, depends_on_id from work_request_dependency where work_request_id = any(?::int[]) order by depends_on_id',
        [intArray(ids)],
      );
      return ids.map((id) => rows.filter((r) => r.work_request_id === id).map((r) => r.depends_on_id));
    }),
  };
}
