import { Repeater } from 'graphql-yoga';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import { WorkRequestSchema, type WorkRequest } from '../../storage/entities/work-request.js';
import { WorkerSchema, type Worker } from '../../storage/entities/worker.js';
import { requireWorker } from '../../services/identity/auth.js';
import { stillAssigned } from '../../services/work/work-lifecycle.js';
import { unacknowledgedAssignments } from '../../services/workers/presence.js';
import { splitWorkspaceName } from '../../services/input/validate.js';
import { viewerSeesWorkRequest } from '../../services/identity/visibility.js';
import { followLog, WorkRequestLogPageRef, type LogPageOut } from './job-output.js';
import { WorkRequestRef } from './work-request.js';
import { WorkerRef } from './worker.js';

/**
 * Whether the subscription may still be sent anything: its connection's token is checked again
 * before every event (revoked, disabled or expired since the connection opened: the socket is
 * closed and nothing more is sent, even when the revocation's own notice has not arrived yet).
 */
const REVOKED_REASON = 'the bearer token was revoked or has expired';

async function tokenStillValid(ctx: Context): Promise<boolean> {
  const connection = ctx.connection;
  if (!connection || connection.tokenId === null) return true;
  if (await connection.stillValid()) return true;
  connection.refuse(REVOKED_REASON);
  return false;
}

/**
 * A worker's assignments: first what is assigned to it and not acknowledged yet (a reconnecting agent
 * gets it again), then each new assignment as it is made. The event stream is listening (in every
 * process) before the catch-up query, so nothing assigned in between is missed; ids already sent are
 * not sent twice.
 */
async function* assignmentsOf(ctx: Context, closed: Promise<void>): AsyncGenerator<WorkRequest> {
  const workerId = requireWorker(ctx.viewer).id; // the id only: the entity would keep its EntityManager
  const stream = endedBy(closed, ctx.events.subscribe('workAssigned', String(workerId))[Symbol.asyncIterator]());
  let next = stream.next(); // a stream subscribes on its first next()
  const sent = new Set<number>();
  try {
    await ctx.events.listening?.();
    ctx.renew();
    const backlog = await unacknowledgedAssignments(ctx.em, workerId);
    for (const wr of backlog) {
      if (!(await tokenStillValid(ctx))) return;
      sent.add(wr.id);
      yield wr;
    }
    ctx.renew(); // idle until the next assignment: hold no session
    for (;;) {
      const event = await next;
      if (event.done) return;
      next = stream.next();
      const id = event.value.workRequestId;
      if (sent.has(id)) continue;
      // Reload: the assignment may have been taken back (lease) between the event and now. The same
      // statement checks the connection's token again (see tokenStillValid).
      ctx.renew();
      const { workRequest: wr, tokenValid } = await stillAssigned(
        ctx.em,
        id,
        workerId,
        ctx.connection?.tokenId ?? null,
      );
      if (wr) {
        if (!tokenValid) {
          ctx.connection!.refuse(REVOKED_REASON);
          return;
        }
        sent.add(id);
        yield wr;
      }
      ctx.renew();
    }
  } finally {
    await stream.return?.();
  }
}

/**
 * The events that `wanted` keeps, each loaded by `load` once per process, in the event's session
 * shared by every subscriber (context-factory.ts), then sent to this subscriber if `visible` says
 * its viewer may see it and its token is still valid. The session is dropped once the event is sent:
 * an idle subscription holds none.
 */
async function* reloadedEvents<P extends object, T>(
  ctx: Context,
  closed: Promise<void>,
  events: AsyncIterable<P>,
  wanted: (payload: P) => boolean,
  load: (em: Context['em'], payload: P) => Promise<T | null>,
  visible: (value: T) => Promise<boolean>,
): AsyncGenerator<T> {
  const stream = endedBy(closed, events[Symbol.asyncIterator]());
  try {
    for (;;) {
      const next = await stream.next();
      if (next.done) return;
      if (!wanted(next.value)) continue;
      ctx.enterEvent(next.value);
      const value = await ctx.shared('object', () => load(ctx.em, next.value));
      if (value !== null && (await visible(value))) {
        if (!(await tokenStillValid(ctx))) return;
        yield value;
      }
      ctx.renew();
    }
  } finally {
    await stream.return?.();
  }
}

function workRequestChanges(
  ctx: Context,
  closed: Promise<void>,
  id: number | null,
  workspace: string | null,
): AsyncGenerator<WorkRequest> {
  const filter = workspace ? splitWorkspaceName(workspace, 'workspace') : null;
  return reloadedEvents(
    ctx,
    closed,
    ctx.events.subscribe('workRequestChanged'),
    (e) => id === null || e.id === id,
    (em, e) => em.findOne(WorkRequestSchema, { id: e.id }, { populate: ['workspace', 'workspace.scope'] }),
    async (wr) => {
      if (filter && (wr.workspace.name !== filter.name || wr.workspace.scope.name !== filter.scope)) return false;
      return viewerSeesWorkRequest(ctx.em, ctx.viewer, wr); // the visibility rules of docs/design.md: interfaces, per subscriber
    },
  );
}

function workerChanges(ctx: Context, closed: Promise<void>, name: string | null): AsyncGenerator<Worker> {
  return reloadedEvents(
    ctx,
    closed,
    ctx.events.subscribe('workerChanged'),
    (e) => name === null || e.name === name,
    (em, e) => em.findOne(WorkerSchema, { id: e.id }),
    async () => true, // every viewer may see that a worker changed; its fields say what each may read
  );
}

/**
 * Ends an event stream when `closed` settles: its pending next() then resolves as done. A generator
 * awaiting an event cannot be ended by its own return() (that waits for the pending next), so a
 * closed socket would otherwise wait for the next event: the connection's onDisconnect (the worker
 * marked disconnected) with it, and the event listener would stay.
 */
function endedBy<T>(closed: Promise<void>, stream: AsyncIterator<T>): AsyncIterator<T> {
  void closed.then(() => stream.return?.());
  return stream;
}

/** Wraps a generator so that closing the subscription ends it at once, even while it awaits an event. */
function stoppable<T>(source: (closed: Promise<void>) => AsyncGenerator<T>): AsyncIterable<T> {
  return new Repeater<T>(async (push, stop) => {
    const it = source(stop.then(() => undefined));
    let done = false;
    void stop.then(() => {
      done = true;
      void it.return(undefined);
    });
    try {
      for (let r = await it.next(); !r.done && !done; r = await it.next()) await push(r.value);
    } finally {
      stop();
    }
  });
}

builder.subscriptionType({
  description:
    'Live changes over WebSocket (graphql-ws, the bearer token in connectionParams); each shows only what the caller may see',
  fields: (t) => ({
    assignments: t.field({
      type: WorkRequestRef,
      description: 'Worker token: the work assigned to this worker, unacknowledged assignments first',
      subscribe: (_r, _a, ctx) => stoppable((closed) => assignmentsOf(ctx, closed)),
      resolve: (wr: WorkRequest) => wr,
    }),
    workRequestChanged: t.field({
      type: WorkRequestRef,
      description: 'Changes of one request, or of a workspace (scope/name), or of everything the viewer may see',
      args: {
        id: t.arg.id({ description: 'Only this work request' }),
        workspace: t.arg.string({ description: 'Only the work of this workspace, written scope/name' }),
      },
      subscribe: (_r, args, ctx) =>
        stoppable((closed) =>
          workRequestChanges(ctx, closed, args.id != null ? Number(args.id) : null, args.workspace ?? null),
        ),
      resolve: (wr: WorkRequest) => wr,
    }),
    workerChanged: t.field({
      type: WorkerRef,
      description: 'Changes of one worker (by name) or of all workers: connection, status, tags',
      args: { name: t.arg.string({ description: 'Only this worker; omitted: every worker' }) },
      subscribe: (_r, args, ctx) => stoppable((closed) => workerChanges(ctx, closed, args.name ?? null)),
      resolve: (w: Worker) => w,
    }),
    workRequestLog: t.field({
      type: WorkRequestLogPageRef,
      description:
        "A request's output as it is written: the pages there are from `offset`, then each new chunk; it ends after a page with `complete` (the request finished). The same visibility as the request",
      args: {
        id: t.arg.id({ required: true, description: 'The work request' }),
        offset: t.arg.float({ defaultValue: 0, description: 'A byte offset: 0, or a nextOffset from a page before' }),
      },
      subscribe: (_r, args, ctx) =>
        stoppable((closed) => followLog(ctx, closed, String(args.id), args.offset, () => tokenStillValid(ctx))),
      resolve: (page: LogPageOut) => page,
    }),
  }),
});
