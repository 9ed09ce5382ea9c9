import { builder } from '../builder.js';
import {
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import { reportInstanceInterruption } from '../../services/pools/interruptions.js';
import { heartbeat } from '../../services/workers/presence.js';
import { RunStatisticsInput, runStatisticsOfInput } from './run-statistics.js';
import {
  completeWorkRequest,
  releaseWorkRequest,
  requestWork,
  startWorkRequest,
} from '../../services/work/work-lifecycle.js';
import { ResultEnum, WorkRequestRef } from './work-request.js';
import { WorkerRef } from './worker.js';

const RequestWorkPayload = builder
  .objectRef<{ workRequest: Awaited<ReturnType<typeof requestWork>> }>('RequestWorkPayload')
  .implement({
    description: 'The work assigned by requestWork, if any',
    fields: (t) => ({
      workRequest: t.field({
        type: WorkRequestRef,
        nullable: true,
        description: 'Null when there is nothing this worker may run now',
        resolve: (p) => p.workRequest,
      }),
    }),
  });

const HeartbeatPayload = builder.objectRef<Awaited<ReturnType<typeof heartbeat>>>('HeartbeatPayload').implement({
  description: 'What the server knows of the calling worker',
  fields: (t) => ({
    worker: t.field({ type: WorkerRef, description: 'The calling worker', resolve: (p) => p.worker }),
    draining: t.boolean({
      description: 'Whether the worker takes no new work (admin drain, or its own shutdown)',
      resolve: (p) => p.worker.draining || p.worker.shuttingDown,
    }),
    assignedWorkRequests: t.field({
      type: [WorkRequestRef],
      description:
        'Work assigned to this worker and not acknowledged yet: the agent picks up anything a lost push missed',
      resolve: (p) => p.assigned,
    }),
  }),
});

const HeartbeatInput = builder.inputType('HeartbeatInput', {
  description: "The agent's state",
  fields: (t) => ({
    shuttingDown: t.boolean({ description: 'The agent is shutting down: finish what runs, take nothing new' }),
    running: t.idList({ description: 'What the agent is running (informational)' }),
  }),
});

builder.mutationFields((t) => ({
  reportInstanceInterruption: t.field({
    type: WorkerRef,
    description:
      'Worker token: the provider is taking this pool worker’s machine away (an EC2 spot interruption notice). The worker becomes INACTIVE at once, its work goes back to the queue without counting a retry, its instance is stopped and replaced (on-demand first, when the pool has such an offering)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('ReportInstanceInterruptionInput', {
          description: 'What the provider’s notice said',
          fields: (f) => ({
            action: f.string({
              description: 'The provider’s action (EC2: terminate, stop or hibernate); at most 40 characters kept',
            }),
            time: f.field({ type: 'DateTime', description: 'When the machine goes, as the notice said' }),
          }),
        }),
        required: true,
        description: 'The notice',
      }),
    },
    resolve: (_r, { input }, ctx) =>
      reportInstanceInterruption(ctx.em, ctx.viewer, ctx.config, ctx.events, {
        action: input.action ?? null,
        time: input.time ?? null,
      }),
  }),
  heartbeat: t.field({
    type: HeartbeatPayload,
    description: 'Worker token: the agent is alive (lighter than a metadata report)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError] },
    args: { input: t.arg({ type: HeartbeatInput, required: true, description: 'Whether the agent is shutting down' }) },
    resolve: (_r, { input }, ctx) => heartbeat(ctx.em, ctx.viewer, ctx.events, input, ctx.serverStopping()),
  }),
  releaseWorkRequest: t.field({
    type: WorkRequestRef,
    description: 'Worker token: gives an assignment back to the queue untouched (no handler for it, shutting down)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('ReleaseWorkRequestInput', {
          description: 'The assignment to give back and why',
          fields: (f) => ({
            id: f.id({ required: true, description: 'The work request assigned to this worker' }),
            reason: f.string({
              required: true,
              description: 'Why it is given back (no handler for it, shutting down)',
            }),
          }),
        }),
        required: true,
        description: 'The assignment to give back, and why',
      }),
    },
    resolve: (_r, { input }, ctx) => releaseWorkRequest(ctx, String(input.id), input.reason),
  }),
  requestWork: t.field({
    type: RequestWorkPayload,
    description: 'Worker token: atomically assigns and returns the next work request this worker may run (pull)',
    errors: { types: [UnauthenticatedError, ForbiddenError] },
    resolve: async (_r, _a, ctx) => ({ workRequest: await requestWork(ctx) }),
  }),
  startWorkRequest: t.field({
    type: WorkRequestRef,
    description: 'Worker token: acknowledges an assignment, ASSIGNED → RUNNING',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('StartWorkRequestInput', {
          description: 'The assignment to acknowledge',
          fields: (f) => ({ id: f.id({ required: true, description: 'The work request assigned to this worker' }) }),
        }),
        required: true,
        description: 'The assignment to start',
      }),
    },
    resolve: (_r, { input }, ctx) => startWorkRequest(ctx, String(input.id)),
  }),
  completeWorkRequest: t.field({
    type: WorkRequestRef,
    description:
      "The assigned worker (or an admin) records the result, with the handler's exit code; a FAILURE or ERROR without a statusReason takes the last lines of the output as its reason",
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('CompleteWorkRequestInput', {
          description: 'The result of a work request and how the handler ended',
          fields: (f) => ({
            id: f.id({ required: true, description: 'The work request (ASSIGNED or RUNNING)' }),
            result: f.field({ type: ResultEnum, required: true, description: 'How the work ended' }),
            exitCode: f.int({ description: "The handler's exit code; omitted when it ended by a signal" }),
            statusReason: f.string({
              description: 'Why it failed (FAILURE and ERROR), at most 1000 characters are kept',
            }),
            statistics: f.field({
              type: RunStatisticsInput,
              description: 'What the run used, as the agent measured it (kept from a worker only, once per request)',
            }),
          }),
        }),
        required: true,
        description: 'The work request and how it ended',
      }),
    },
    resolve: (_r, { input }, ctx) =>
      completeWorkRequest(ctx, String(input.id), input.result, {
        exitCode: input.exitCode,
        statusReason: input.statusReason,
        statistics: input.statistics ? runStatisticsOfInput(input.statistics) : null,
      }),
  }),
}));
