/**
 * A provider is taking a pool worker's machine away (an EC2 spot interruption notice, seen by its
 * agent): the worker is terminated at once, its work goes back to the queue without counting a retry
 * (the work did nothing wrong), its instance is STOPPING, and the pool's spot offerings are set aside
 * for a while when it has an on-demand one (providers/offerings.ts: interruptionMarks), so
 * that the replacement the demand launches for the re-queued work is on-demand. One transaction.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { WorkerPoolSchema } from '../../storage/entities/worker-pool.js';
import type { Worker } from '../../storage/entities/worker.js';
import { InvalidStateError } from '../../core/errors.js';
import type { Events } from '../../storage/events.js';
import { interruptionMarks, offeringsOf } from '../../providers/offerings.js';
import { requireWorker, type Viewer } from '../identity/auth.js';
import { publishTermination, terminateIn } from '../workers/terminate.js';
import { recordOfferingMarks } from './offering-marks.js';

/** What the agent read of the notice. */
export interface InterruptionNotice {
  /** The provider's word for what happens (EC2: terminate, stop, hibernate). */
  readonly action?: string | null;
  /** When the machine goes, as the provider said. */
  readonly time?: Date | null;
}

/** The calling worker's machine is being taken away: see the module's comment. Returns the worker, now INACTIVE. */
export async function reportInstanceInterruption(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'leases' | 'tags' | 'statistics' | 'provisioner'>,
  events: Events,
  notice: InterruptionNotice,
): Promise<Worker> {
  const me = requireWorker(viewer);
  if (!me.pool)
    throw new InvalidStateError(
      `worker "${me.name}" is not a pool worker: only a pool's instances are interrupted by their provider`,
    );
  const now = new Date();
  const action = (notice.action ?? 'terminate').slice(0, 40);
  const reason = `its instance is being interrupted by its provider (${action}${notice.time ? ` at ${notice.time.toISOString()}` : ''})`;
  const done = await em.fork().transactional(async (tx) => {
    const t = await terminateIn(tx, config, [me.id], reason, { state: 'STOPPING' }, now, false);
    await tx.execute(`update instance set error = ? where worker_id = ? and error is null`, [
      `interrupted by its provider (${action})`,
      me.id,
    ]);
    const pool = await tx.findOne(WorkerPoolSchema, { id: me.pool!.id });
    if (pool)
      await recordOfferingMarks(
        tx,
        pool.id,
        interruptionMarks(offeringsOf(pool.specifications), now, config.provisioner.offeringUnavailableMs),
        now,
      );
    return t;
  });
  publishTermination(events, done); // workerChanged: the provisioner's next cycle stops it and launches for its work
  return (await em.refresh(me)) ?? me;
}
