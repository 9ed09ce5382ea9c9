/**
 * Lists of workers: the API's page of workers by name, and the active workers with their status that
 * the status pages and the metrics count. A filter on tags reads worker details, so it keeps only the
 * workers whose details the viewer may see (services/identity/visibility.ts).
 */
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { asFilter } from '../../storage/db/condition.js';
import { WorkerSchema, type Worker } from '../../storage/entities/worker.js';
import { activeWorkSql } from '../../scheduler/rules/active-work.js';
import {
  availabilityColumns,
  factsOfRow,
  workerStatus,
  type AvailabilityRow,
  type WorkerStatus,
} from '../../scheduler/rules/availability.js';
import type { Viewer } from '../identity/auth.js';
import { principalOf, workerDetailsSql } from '../identity/visibility.js';

/** Which workers a page of the API holds; every field given must hold. */
export interface WorkerListFilter {
  /** The name of their pool. */
  readonly pool?: string | null;
  readonly type?: Worker['type'] | null;
  readonly providesTag?: string | null;
  readonly requiresTag?: string | null;
  /** Also terminated workers (left out otherwise). */
  readonly includeInactive?: boolean | null;
}

/** The workers the filter keeps, by name, after the name `after` when given; `limit` at most (one statement). */
export function listWorkers(
  em: EntityManager,
  viewer: Viewer,
  filter: WorkerListFilter | null | undefined,
  page: { after: string | null; limit: number },
): Promise<Worker[]> {
  const f = filter;
  const where: FilterQuery<Worker> = {};
  if (!f?.includeInactive) where.terminatedAt = null;
  if (f?.pool) where.pool = { name: f.pool };
  if (f?.type) where.type = f.type;
  if (f?.providesTag) where.providedTags = { $contains: [f.providesTag] };
  if (f?.requiresTag) where.requiredTags = { $contains: [f.requiresTag] };
  if (page.after !== null) where.name = { $gt: page.after };
  const principal = principalOf(viewer);
  const and: FilterQuery<Worker>[] = [where];
  if (f?.providesTag || f?.requiresTag) and.push(asFilter((alias) => workerDetailsSql(principal, alias)));
  return em.find(WorkerSchema, { $and: and }, { orderBy: { name: 'asc' }, limit: page.limit });
}

/** An active worker with its status now. */
export interface WorkerRow {
  id: number;
  name: string;
  type: string;
  /** The name of its pool; null for a static worker. */
  pool: string | null;
  lastSeenAt: Date | null;
  status: WorkerStatus;
}

/** Which active workers {@link activeWorkerRows} reads. */
export interface WorkerRowFilter {
  /** The name of their pool; false: the static workers (in no pool); null or absent: any. */
  readonly pool?: string | false | null;
  /** A tag they provide, matched only on the workers whose details `viewer` may see. */
  readonly providesTag?: { readonly tag: string; readonly viewer: Viewer } | null;
}

/**
 * The active workers (terminated pool workers are history, left out), in type and name order, with
 * their status (scheduler/rules/availability.ts, metadata fresh for `metadataFreshMs`); one statement.
 */
export async function activeWorkerRows(
  em: EntityManager,
  metadataFreshMs: number,
  filter: WorkerRowFilter = {},
): Promise<WorkerRow[]> {
  const where: string[] = ['w.terminated_at is null'];
  const params: unknown[] = [];
  if (filter.pool === false) where.push('w.pool_id is null');
  else if (filter.pool) {
    where.push('p.name = ?');
    params.push(filter.pool);
  }
  if (filter.providesTag) {
    const details = workerDetailsSql(principalOf(filter.providesTag.viewer), 'w');
    where.push(`w.provided_tags @> array[?]::text[] and ${details.sql}`);
    params.push(filter.providesTag.tag, ...details.params);
  }
  const rows = await em.execute<
    (AvailabilityRow & { id: number; name: string; pool: string | null; last_seen_at: Date | null; active: number })[]
  >(
    `select w.id, w.name, p.name as pool, ${availabilityColumns('w')}, w.last_seen_at,
            ${activeWorkSql('w.id')} as active
       from worker w left join worker_pool p on p.id = w.pool_id
      where ${where.join(' and ')}
      order by w.type, w.name`,
    params,
  );
  const now = new Date();
  const date = (d: Date | string | null) => (d === null ? null : new Date(d));
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    type: r.type,
    pool: r.pool,
    lastSeenAt: date(r.last_seen_at),
    status: workerStatus(factsOfRow(r), r.active, now, metadataFreshMs),
  }));
}
