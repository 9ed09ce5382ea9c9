import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { isFinished } from '../../core/work-request-status.js';
import { WorkRequestSchema, type WorkRequest } from '../../storage/entities/work-request.js';
import { ERROR_CODES, ForbiddenError, InputError, InvalidStateError, NotFoundError } from '../../core/errors.js';
import type { Events } from '../../storage/events.js';
import type { LifecycleRecorder } from '../metrics-recorder.js';
import type { Scheduler } from '../../scheduler/scheduler.js';
import { isAdmin, requireUser, type Viewer } from '../identity/auth.js';
import { roleIn } from '../identity/directory.js';
import { abortAll, lockOpenDescendants } from '../workflows/orchestration.js';
import { settleDependents } from '../workflows/settle-dependents.js';
import { viewerSeesWorkRequest } from '../identity/visibility.js';

/** The services a work-request operation needs. */
export interface WorkRequestDeps {
  em: EntityManager;
  viewer: Viewer;
  /** What the operations read: the input bounds, the scheduler's, the quarantine's, and the analysis's sections. */
  config: Pick<Config, 'input' | 'scheduler' | 'workers' | 'tags' | 'statistics'>;
  events: Events;
  scheduler: Scheduler;
  /** Told of completions (the run-time histogram); none when absent. */
  metrics?: LifecycleRecorder;
  /** Whether this process is stopping (Context.serverStopping): a pull then marks its worker seen, not connected. */
  serverStopping?: () => boolean;
}

function parseId(raw: string | number, path: string): number {
  const id = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isSafeInteger(id) || id <= 0)
    throw new InputError(ERROR_CODES.INVALID_INPUT, `${path}: "${raw}" is not a work request id`, path);
  return id;
}

/** Finds a work request the viewer may see (others look like missing ones). */
export async function findVisibleWorkRequest(
  em: EntityManager,
  viewer: Viewer,
  rawId: string | number,
  path = 'id',
): Promise<WorkRequest> {
  const id = parseId(rawId, path);
  const wr = await em.findOne(WorkRequestSchema, { id }, { populate: ['workspace', 'workspace.scope'] });
  if (!wr || !(await viewerSeesWorkRequest(em, viewer, wr)))
    throw new NotFoundError(`${path}: no work request ${rawId}`, path);
  return wr;
}

/** Aborts a request that has not finished. The creator, the workspace's owners and admins may. */
export async function abortWorkRequest(deps: WorkRequestDeps, rawId: string | number): Promise<WorkRequest> {
  const { em, viewer, config } = deps;
  const { user } = requireUser(viewer);
  const wr = await findVisibleWorkRequest(em, viewer, rawId);
  const mayAbort =
    isAdmin(viewer) || wr.createdBy.id === user.id || (await roleIn(em, viewer, wr.workspace)) === 'owner';
  if (!mayAbort) throw new ForbiddenError('only the creator, the workspace owners and admins may abort a work request');
  if (isFinished(wr.status)) throw new InvalidStateError(`work request ${wr.id} is already ${wr.status}`);
  const changed = await em.transactional(async (tx) => {
    // A workflow's open children are locked before it, as the completion of a child locks them (orchestration.ts).
    const children = await lockOpenDescendants(tx, wr.id);
    const locked = await tx.findOneOrFail(WorkRequestSchema, { id: wr.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
    if (isFinished(locked.status)) throw new InvalidStateError(`work request ${wr.id} is already ${locked.status}`);
    locked.status = 'ABORTED';
    locked.completedAt = new Date();
    locked.statusReason = `aborted by ${user.username}`;
    // Children that an expansion committed while this waited for the workflow's lock are open too.
    const late = (await lockOpenDescendants(tx, wr.id)).filter((c) => !children.includes(c));
    const aborted = abortAll([...children, ...late], `workflow ${wr.id} was aborted by ${user.username}`);
    await tx.flush();
    return [
      { id: locked.id, workspaceId: wr.workspace.id },
      ...aborted,
      ...(await settleDependents(tx, config, [locked.id, ...aborted.map((a) => a.id)])),
    ];
  });
  await em.refresh(wr);
  for (const change of changed) deps.events.publish('workRequestChanged', change);
  deps.scheduler.trigger('work-finished');
  return wr;
}

/** Adds dependencies to a BLOCKED request; a dependency cycle is refused. */
export async function addWorkRequestDependencies(
  deps: WorkRequestDeps,
  rawId: string | number,
  rawDependsOn: (string | number)[],
): Promise<WorkRequest> {
  const { em, viewer } = deps;
  const { user } = requireUser(viewer);
  const wr = await findVisibleWorkRequest(em, viewer, rawId);
  if (!isAdmin(viewer) && wr.createdBy.id !== user.id)
    throw new ForbiddenError('only the creator and admins may change dependencies');
  const ids = [...new Set(rawDependsOn.map((d, i) => parseId(d, `dependsOn[${i}]`)))];
  await em.transactional(async (tx) => {
    const locked = await tx.findOneOrFail(
      WorkRequestSchema,
      { id: wr.id },
      { lockMode: LockMode.PESSIMISTIC_WRITE, populate: ['dependencies'] },
    );
    if (locked.status !== 'BLOCKED')
      throw new InvalidStateError(
        `work request ${wr.id} is ${locked.status}: dependencies can only be added while it is BLOCKED`,
      );
    const targets = await tx.find(WorkRequestSchema, { id: { $in: ids } }, { populate: ['workspace'] });
    for (const id of ids) {
      const target = targets.find((t) => t.id === id);
      if (!target || !(await viewerSeesWorkRequest(tx, viewer, target)))
        throw new InputError(ERROR_CODES.UNKNOWN_DEPENDENCY, `dependsOn: no work request ${id}`, 'dependsOn');
      if (target.status === 'ABORTED')
        throw new InputError(
          ERROR_CODES.UNKNOWN_DEPENDENCY,
          `dependsOn: work request ${id} was aborted and will never complete`,
          'dependsOn',
        );
    }
    // A cycle exists when the request is reachable from one of its new dependencies.
    const [{ cycle }] = await tx.execute<{ cycle: boolean }[]>(
      `with recursive reach(id) as (
         select unnest(?::int[])
         union select d.depends_on_id from work_request_dependency d join reach r on d.work_request_id = r.id
       ) select exists(select 1 from reach where id = ?) as cycle`,
      [`{${ids.join(',')}}`, wr.id],
    );
    if (cycle)
      throw new InputError(
        ERROR_CODES.DEPENDENCY_CYCLE,
        `dependsOn: work request ${wr.id} would depend on itself through ${ids.join(', ')}`,
        'dependsOn',
      );
    for (const t of targets) locked.dependencies.add(t);
    await tx.flush();
  });
  await em.refresh(wr, { populate: ['dependencies'] });
  return wr;
}
