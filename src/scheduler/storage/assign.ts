import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, toDate } from '../../storage/db/arrays.js';

/** A fresh assignment: which request went to which worker. */
export interface Assignment {
  readonly workRequestId: number;
  readonly workerId: number;
  /** The request's workspace, for the workRequestChanged event. */
  readonly workspaceId: number;
  /** When the request last became PENDING (for the assignment latency metric). */
  readonly pendingAt?: Date | null;
}

/** An assignment by a worker's pull (next-work.ts, host-pull.ts), with every column of the request as the assignment left it. */
export type NextAssignment = Assignment & { readonly row: Record<string, unknown> };

/**
 * The one way a request is assigned: a PENDING request becomes ASSIGNED to a worker, now. `pairs` is
 * a relation of `(id, worker_id)` (a subquery or a function call, with its parameters), read as the
 * alias `s`; the statement takes the time of the assignment first, then the relation's parameters.
 * Returns `returning` of the rows assigned (`w` is the request; by default `id, workspace_id,
 * pending_at`, what AssignedRow holds). The caller holds the rows' locks (SKIP
 * LOCKED where it picked them) and the workers' capacity in check: next-work.ts, pass.ts and the
 * quarantine probes (services/work/quarantine-probes.ts, through assignRequests).
 */
export const assignSql = (pairs: string, returning = 'w.id, w.workspace_id, w.pending_at') => `
  update work_request w set status = 'ASSIGNED', worker_id = s.worker_id, assigned_at = ?::timestamptz
    from ${pairs} as s(id, worker_id)
   where w.id = s.id and w.status = 'PENDING'
  returning ${returning}`;

/** A row that assignSql returns. */
export interface AssignedRow {
  readonly id: number;
  readonly workspace_id: number;
  readonly pending_at: Date | string | null;
}

/** Assigns each request to its worker in one statement (assignSql); returns the assignments made, in the order asked. */
export async function assignRequests(
  em: EntityManager,
  pairs: readonly { readonly workRequestId: number; readonly workerId: number }[],
  now: Date,
): Promise<Assignment[]> {
  if (!pairs.length) return [];
  const rows = await em.execute<AssignedRow[]>(assignSql('unnest(?::int[], ?::int[])'), [
    now,
    intArray(pairs.map((a) => a.workRequestId)),
    intArray(pairs.map((a) => a.workerId)),
  ]);
  const rowOf = new Map(rows.map((r) => [r.id, r]));
  return pairs.flatMap((a) => {
    const row = rowOf.get(a.workRequestId);
    return row
      ? [
          {
            workRequestId: a.workRequestId,
            workerId: a.workerId,
            workspaceId: row.workspace_id,
            pendingAt: toDate(row.pending_at),
          },
        ]
      : [];
  });
}
