import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { intArray } from '../../storage/db/arrays.js';
import { UserSchema } from '../../storage/entities/user.js';
import { WorkRequestSchema, type WorkRequest } from '../../storage/entities/work-request.js';
import { WorkerSchema } from '../../storage/entities/worker.js';
import { WorkspaceSchema } from '../../storage/entities/workspace.js';
import { activeWorkSql } from '../../scheduler/rules/active-work.js';
import { availableParams, probeableSql } from '../../scheduler/rules/availability.js';
import { assignRequests, type Assignment } from '../../scheduler/storage/assign.js';
import { matchTags } from '../../core/tags/match.js';
import { analyzeRequest } from '../workflows/task-analysis.js';
import { freezeAnalysis } from '../workflows/queue-request.js';

/**
 * Quarantine probes (docs/design.md: placement quality): a quarantined worker that is otherwise ready for work (mayBeProbed in
 * scheduler/rules/availability.ts) and holds nothing is given, at most once per `quarantineProbeMs` (counted
 * from its quarantine, then from its last probe), a `noop` worker task, assigned to it alone and pushed
 * like any assignment. Its SUCCESS lifts the quarantine (scheduler/storage/quarantine.ts); an ERROR or FAILURE
 * leaves it until the next probe. The probe is a real work request, marked `quarantine_probe`, in the
 * workspace and on behalf of the creator of the worker's last errored request (what an admin looks
 * at to see why it was quarantined). It is never queued (no class: no matcher sees it) and never
 * re-queued (a released or expired probe is ABORTED), so no other worker ever runs it.
 */

/** The task a probe runs: the least work that shows the agent takes, starts and completes work again. */
export const PROBE_TASK = { taskType: 'worker', taskName: 'noop', taskData: {} } as const;

/** A probe just given (an assignment to push), with its worker's name. */
export interface ProbeStarted extends Assignment {
  readonly workerName: string;
}

/** What one round of probes did: the probes given, and the due workers that could not be probed, with why. */
export interface ProbeRound {
  readonly started: ProbeStarted[];
  readonly skipped: { readonly workerName: string; readonly why: string }[];
}

/**
 * The quarantined workers that may be probed and were quarantined before the time given (availableParams,
 * then that time), locked; read through the index worker_quarantined, which holds only quarantined workers.
 */
export const DUE_FOR_PROBE_SQL = `
  select w.id, w.name, w.provided_tags, w.required_tags from worker w
   where ${probeableSql('w')} and w.quarantined_at <= ?
   order by w.id
   for update of w skip locked`;

/**
 * Gives a probe to every quarantined worker that is due one. Several processes may run this at once:
 * each worker row is locked (SKIP LOCKED: one another process is probing is left to it), and what it
 * holds and when it was last probed are read after the lock, so a probe committed meanwhile is seen and
 * a worker never has two probes in flight. Runs in the caller's transaction; the caller publishes.
 */
export async function startQuarantineProbes(
  em: EntityManager,
  config: Pick<Config, 'workers' | 'tags' | 'statistics'>,
  now: Date,
): Promise<ProbeRound> {
  if (config.workers.quarantineProbeMs <= 0) return { started: [], skipped: [] };
  const due = new Date(now.getTime() - config.workers.quarantineProbeMs);
  const workers = await em.execute<{ id: number; name: string; provided_tags: string[]; required_tags: string[] }[]>(
    DUE_FOR_PROBE_SQL,
    [...availableParams(now, config.workers.metadataFreshMs), due],
  );
  if (!workers.length) return { started: [], skipped: [] };
  // In a statement of its own, after the locks (as in next-work.ts): what a concurrent transaction
  // committed before the lock was granted is seen.
  const facts = await em.execute<
    {
      id: number;
      active: number;
      last_probe_at: Date | string | null;
      workspace_id: number | null;
      created_by_id: number | null;
    }[]
  >(
    `select w.id,
            ${activeWorkSql('w.id')} as active,
            (select r.created_at from work_request r where r.worker_id = w.id and r.quarantine_probe order by r.id desc limit 1) as last_probe_at,
            e.workspace_id, e.created_by_id
       from unnest(?::int[]) as w(id)
       left join lateral (
         select r.workspace_id, r.created_by_id from work_request r
          where r.worker_id = w.id and r.status = 'COMPLETED' and r.result = 'ERROR' and not r.quarantine_probe
          order by r.completed_at desc, r.id desc limit 1
       ) e on true`,
    [intArray(workers.map((w) => w.id))],
  );
  const started: { worker: (typeof workers)[number]; wr: WorkRequest }[] = [];
  const skipped: ProbeRound['skipped'] = [];
  for (const worker of workers) {
    const f = facts.find((x) => x.id === worker.id)!;
    if (f.active > 0) continue; // it still holds work (maybe its last probe): it will finish or be taken back first
    if (f.last_probe_at !== null && new Date(f.last_probe_at) > due) continue;
    if (f.workspace_id === null || f.created_by_id === null) {
      skipped.push({
        workerName: worker.name,
        why: 'it has no errored request whose workspace and creator the probe could take',
      });
      continue;
    }
    const workspace = await em.findOneOrFail(WorkspaceSchema, { id: f.workspace_id }, { populate: ['scope'] });
    const creator = await em.findOneOrFail(UserSchema, { id: f.created_by_id });
    const analysis = await analyzeRequest(em, config, {
      ...PROBE_TASK,
      workspace,
      creator,
      environmentId: null,
      userProvidedTags: [],
      userRequiredTags: [],
    });
    if (!analysis.ok) {
      skipped.push({
        workerName: worker.name,
        why: `the probe's tags: ${analysis.errors.map((e) => e.message).join('; ')}`,
      });
      continue;
    }
    // The two-way tag match every assignment obeys: a worker without a noop handler, or one that
    // requires what a noop in that workspace does not provide, cannot be probed (an admin lifts it).
    const match = matchTags(
      { provided: analysis.providedTags, required: analysis.requiredTags },
      { provided: worker.provided_tags, required: worker.required_tags },
    );
    if (!match.ok) {
      skipped.push({
        workerName: worker.name,
        why: `the probe does not match it (missing on the worker: ${match.missingOnWorker.join(', ') || 'none'}; on the task: ${match.missingOnTask.join(', ') || 'none'})`,
      });
      continue;
    }
    const wr = em.create(WorkRequestSchema, {
      ...PROBE_TASK,
      taskData: {},
      workspace,
      createdBy: creator,
      quarantineProbe: true,
      worker: em.getReference(WorkerSchema, worker.id),
    });
    freezeAnalysis(wr, analysis, now);
    started.push({ worker, wr });
  }
  await em.flush();
  // Straight to its worker, in this transaction, by the one assignment every request gets (no class:
  // no queue ever lists it, and no other transaction sees it PENDING).
  const assigned = await assignRequests(
    em,
    started.map(({ worker, wr }) => ({ workRequestId: wr.id, workerId: worker.id })),
    now,
  );
  const nameOf = new Map(workers.map((w) => [w.id, w.name]));
  return {
    started: assigned.map((a) => ({
      workRequestId: a.workRequestId,
      workerId: a.workerId,
      workspaceId: a.workspaceId,
      workerName: nameOf.get(a.workerId)!,
    })),
    skipped,
  };
}
