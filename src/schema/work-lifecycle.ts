import { builder } from '../builder.js';
import { completeWorkRequest, requestWork, startWorkRequest } from '../services/work-lifecycle.js';
import { COMMON_ERRORS } from './errors.js';
import { ResultEnum, WorkRequestRef } from './work-request.js';

const RequestWorkPayload = builder.objectRef<{ workRequest: Awaited<ReturnType<typeof requestWork>> }>('RequestWorkPayload').implement({
  fields: (t) => ({
    workRequest: t.field({ type: WorkRequestRef, nullable: true, description: 'Null when there is nothing this worker may run now', resolve: (p) => p.workRequest }),
  }),
});

builder.mutationFields((t) => ({
  requestWork: t.field({
    type: RequestWorkPayload,
    description: 'Worker token: atomically assigns and returns the next work request this worker may run (pull)',
    errors: { types: COMMON_ERRORS },
    resolve: async (_r, _a, ctx) => ({ workRequest: await requestWork(ctx) }),
  }),
  startWorkRequest: t.field({
    type: WorkRequestRef,
    description: 'Worker token: acknowledges an assignment, ASSIGNED → RUNNING',
    errors: { types: COMMON_ERRORS },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, { id }, ctx) => startWorkRequest(ctx, String(id)),
  }),
  completeWorkRequest: t.field({
    type: WorkRequestRef,
    description: 'The assigned worker (or an admin) records the result',
    errors: { types: COMMON_ERRORS },
    args: { id: t.arg.id({ required: true }), result: t.arg({ type: ResultEnum, required: true }) },
    resolve: (_r, { id, result }, ctx) => completeWorkRequest(ctx, String(id), result),
  }),
}));
