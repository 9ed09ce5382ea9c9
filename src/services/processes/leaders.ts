import type { EntityManager } from '@mikro-orm/postgresql';
import { readLeases, type LeaseRow } from '../../storage/db/leader-lease.js';
import { requireAdmin, type Viewer } from '../identity/auth.js';
import { LIST_MAXIMA } from '../input/list-maxima.js';

/** A duty's lease as admins see it: who leads it, since when, in which term, and whether it is still held. */
export interface Leader extends LeaseRow {
  /** Whether the lease has not expired (by the database's clock): someone leads the duty now. */
  readonly held: boolean;
}

/** Every duty's lease (loops/leadership.ts), by duty (the first LIST_MAXIMA.processesShown). Admin only. */
export async function listLeaders(em: EntityManager, viewer: Viewer): Promise<Leader[]> {
  requireAdmin(viewer);
  const [leases, [{ now }]] = await Promise.all([
    readLeases(em, LIST_MAXIMA.processesShown),
    em.execute<{ now: Date | string }[]>('select now() as now'),
  ]);
  const at = new Date(now).getTime();
  return leases.map((l) => ({ ...l, held: l.expiresAt.getTime() > at }));
}
