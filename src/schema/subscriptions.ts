import { Repeater } from 'graphql-yoga';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import { WorkRequestSchema, type WorkRequest } from '../entities/work-request.js';
import { WorkerSchema, type Worker } from '../entities/worker.js';
import { requireWorker } from '../services/auth.js';
import { canSeeWorkRequest } from '../services/work-requests.js';
import { splitWorkspaceName } from '../services/validate.js';
import { WorkRequestRef } from './work-request.js';
import { WorkerRef } from './worker.js';

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
    const backlog = await ctx.em.find(WorkRequestSchema, { worker: workerId, status: 'ASSIGNED' }, { orderBy: { assignedAt: 'asc', id: 'asc' } });
    for (const wr of backlog) {
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
      // Reload: the assignment may have been taken back (lease) between the event and now.
      ctx.renew();
      const wr = await ctx.em.findOne(WorkRequestSchema, { id, worker: workerId, status: 'ASSIGNED' });
      if (wr) {
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
 * The events that `wanted` keeps, each reloaded by `load` in a fresh session (renewed
 * before the load and dropped once the event is sent: an idle subscription holds none) and sent
 * unless `load` finds nothing to send.
 */
async function* reloadedEvents<P, T>(
  ctx: Context,
  closed: Promise<void>,
  events: AsyncIterable<P>,
  wanted: (payload: P) => boolean,
  load: (payload: P) => Promise<T | null>,
): AsyncGenerator<T> {
  const stream = endedBy(closed, events[Symbol.asyncIterator]());
  try {
    for (;;) {
      const next = await stream.next();
      if (next.done) return;
      if (!wanted(next.value)) continue;
      ctx.renew();
      const value = await load(next.value);
      if (value !== null) yield value;
      ctx.renew();
    }
  } finally {
    await stream.return?.();
  }
}

function workRequestChanges(ctx: Context, closed: Promise<void>, id: number | null, workspace: string | null): AsyncGenerator<WorkRequest> {
  const filter = workspace ? splitWorkspaceName(workspace, 'workspace') : null;
  return reloadedEvents(
    ctx,
    closed,
    ctx.events.subscribe('workRequestChanged'),
    (e) => id === null || e.id === id,
    async (e) => {
      const wr = await ctx.em.findOne(WorkRequestSchema, { id: e.id }, { populate: ['workspace', 'workspace.scope'] });
      if (!wr || (filter && (wr.workspace.name !== filter.name || wr.workspace.scope.name !== filter.scope))) return null;
      return (await canSeeWorkRequest(ctx.em, ctx.viewer, wr)) ? wr : null; // the visibility rules of DESIGN §8, per event
    },
  );
}

function workerChanges(ctx: Context, closed: Promise<void>, name: string | null): AsyncGenerator<Worker> {
  return reloadedEvents(ctx, closed, ctx.events.subscribe('workerChanged'), (e) => name === null || e.name === name, (e) => ctx.em.findOne(WorkerSchema, { id: e.id }));
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
      args: { id: t.arg.id(), workspace: t.arg.string() },
      subscribe: (_r, args, ctx) => stoppable((closed) => workRequestChanges(ctx, closed, args.id != null ? Number(args.id) : null, args.workspace ?? null)),
      resolve: (wr: WorkRequest) => wr,
    }),
    workerChanged: t.field({
      type: WorkerRef,
      description: 'Changes of one worker (by name) or of all workers: connection, status, tags',
      args: { name: t.arg.string() },
      subscribe: (_r, args, ctx) => stoppable((closed) => workerChanges(ctx, closed, args.name ?? null)),
      resolve: (w: Worker) => w,
    }),
  }),
});
