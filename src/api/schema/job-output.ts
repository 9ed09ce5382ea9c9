import { GraphQLError } from 'graphql';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import {
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import { costOf } from '../limits/cost.js';
import {
  appendLog,
  isLogFinal,
  LOG_LIMITS,
  readLog,
  type AppendAnswer,
  type LogPage,
} from '../../services/work/job-output.js';
import { viewerSeesWorkRequest } from '../../services/identity/visibility.js';
import { findVisibleWorkRequest } from '../../services/work/work-requests.js';
import { WorkRequestRef } from './work-request.js';

/** A page of a log, and whether the log is over. */
export type LogPageOut = LogPage & { complete: boolean };

/** A page of a work request's output. */
export const WorkRequestLogPageRef = builder.objectRef<LogPageOut>('WorkRequestLogPage').implement({
  description:
    "A page of a work request's output (stdout and stderr in the order the handler wrote them). Offsets are byte offsets in the UTF-8 text of the whole output; NUL is shown as ␀ and bytes that are not UTF-8 as U+FFFD",
  fields: (t) => ({
    text: t.exposeString('text', {
      description:
        'The text of the page; where output was dropped (the log was over TAGSCHED_MAX_LOG_BYTES), a marker line says how much',
    }),
    offset: t.exposeFloat('offset', {
      description: 'Where the page starts (after the dropped part, when the offset asked for fell in it)',
    }),
    nextOffset: t.exposeFloat('nextOffset', {
      description: 'The offset to ask for next; equal to totalBytes when the reader has all there is so far',
    }),
    totalBytes: t.exposeFloat('totalBytes', { description: 'Bytes of output received so far, kept or not' }),
    droppedBytes: t.exposeFloat('droppedBytes', {
      description: 'Bytes dropped between the kept head and the kept tail',
    }),
    truncated: t.boolean({ description: 'Whether some of the output was dropped', resolve: (p) => p.droppedBytes > 0 }),
    complete: t.exposeBoolean('complete', {
      description: 'The request is finished and this page reaches the end: there will be no more',
    }),
  }),
});

const LogAckRef = builder.objectRef<AppendAnswer>('WorkRequestLogAck').implement({
  description: 'The answer to a chunk of output: where the next chunk must start',
  fields: (t) => ({
    nextOffset: t.exposeFloat('nextOffset', {
      description: "The server's count of this run's output bytes: the next chunk starts here",
    }),
    accepted: t.exposeBoolean('accepted', {
      description:
        'Whether this chunk was added; false for a repeat already stored, or a chunk that did not start at nextOffset',
    }),
    totalBytes: t.exposeFloat('totalBytes', { description: 'Bytes of the whole log so far' }),
  }),
});

/** What a page of a log costs (api/limits/cost.ts): one unit per KiB it may carry, so that a list of logs stays bounded. */
export const LOG_PAGE_COST_PER_KIB = 1;

/** The page size asked for: a query argument, so a bad one is a GraphQL error the client can read. */
function pageLimit(limit: number | null | undefined): number {
  const n = limit ?? LOG_LIMITS.defaultPageBytes;
  if (!Number.isSafeInteger(n) || n < 1 || n > LOG_LIMITS.maxPageBytes) {
    throw new GraphQLError(`limit must be between 1 and ${LOG_LIMITS.maxPageBytes} bytes`, {
      extensions: { code: 'INVALID_INPUT' },
    });
  }
  return n;
}

function pageOffset(offset: number | null | undefined): number {
  const n = offset ?? 0;
  if (!Number.isSafeInteger(n) || n < 0)
    throw new GraphQLError('offset must be a whole number of bytes ≥ 0', { extensions: { code: 'INVALID_INPUT' } });
  return n;
}

builder.objectFields(WorkRequestRef, (t) => ({
  exitCode: t.exposeInt('exitCode', {
    nullable: true,
    description: "The handler's exit code, as its agent reported it; null when it ended by a signal or nobody said",
  }),
  log: t.field({
    type: WorkRequestLogPageRef,
    description:
      'Its output, a page at a time: ask again from nextOffset (or follow it with the workRequestLog subscription)',
    extensions: costOf(
      ({ args, childComplexity }) =>
        1 +
        childComplexity +
        LOG_PAGE_COST_PER_KIB * Math.ceil(Math.max(0, Number(args.limit ?? LOG_LIMITS.defaultPageBytes) || 0) / 1024),
    ),
    args: {
      offset: t.arg.float({ defaultValue: 0, description: 'A byte offset: 0, or a nextOffset from a page before' }),
      limit: t.arg.int({
        defaultValue: LOG_LIMITS.defaultPageBytes,
        description: `Bytes at most (1 to ${LOG_LIMITS.maxPageBytes})`,
      }),
    },
    resolve: async (wr, args, ctx) => {
      const offset = pageOffset(args.offset);
      const limit = pageLimit(args.limit);
      // The request was reached through a query that checked it; the log checks again, as its own door.
      if (!(await viewerSeesWorkRequest(ctx.em, ctx.viewer, wr)))
        throw new GraphQLError(`no work request ${wr.id}`, { extensions: { code: 'NOT_FOUND' } });
      const page = await readLog(ctx.em, wr.id, offset, limit);
      return { ...page, complete: isLogFinal(wr.status) && page.nextOffset >= page.totalBytes };
    },
  }),
}));

const AppendWorkRequestLogInput = builder.inputType('AppendWorkRequestLogInput', {
  description: "A chunk of a run's output, from the agent that runs it",
  fields: (t) => ({
    id: t.id({ required: true, description: 'The work request' }),
    offset: t.float({
      required: true,
      description: "Where the chunk starts, in bytes of this run's output as the agent read them",
    }),
    bytes: t.float({
      required: true,
      description: 'How many bytes of the output the chunk holds, as the agent read them',
    }),
    text: t.string({
      required: true,
      description: `The chunk, decoded as UTF-8 (at most ${LOG_LIMITS.maxChunkBytes} bytes); a NUL character is refused, as in every input: the agent sends it as ␀ (U+2400)`,
    }),
  }),
});

builder.mutationFields((t) => ({
  appendWorkRequestLog: t.field({
    type: LogAckRef,
    description:
      "Worker token: adds a chunk of output to a request this worker holds (ASSIGNED or RUNNING). A chunk sent again is recognised by its offset and stored once; a chunk that does not start at the answer's nextOffset is not stored: send again from there",
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: AppendWorkRequestLogInput,
        required: true,
        description: 'The chunk of output and where it goes',
      }),
    },
    resolve: (_r, { input }, ctx) =>
      appendLog(
        { em: ctx.em, viewer: ctx.viewer, events: ctx.events, maxLogBytes: ctx.config.input.maxLogBytes },
        { ...input, id: String(input.id) },
      ),
  }),
}));

/** A request the viewer may see now, or null (unknown, invisible, or a malformed id: all look the same). */
async function visibleRequest(ctx: Context, id: string) {
  try {
    return await findVisibleWorkRequest(ctx.em, ctx.viewer, id);
  } catch (err) {
    if (err instanceof NotFoundError || err instanceof InputError) return null;
    throw err;
  }
}

/**
 * Follows a request's output: what there is from `offset`, then each new chunk as it arrives, and
 * a last page with `complete` once the request is finished. The streams are listening (in every
 * process) before the first read, so nothing written in between is missed; each wake-up reads from
 * where the last page ended, in a fresh session, after checking again that the viewer may see the
 * request (the subscription ends when it no longer may). `stillValid` is asked before each page is
 * sent (the connection's token may have been revoked meanwhile).
 */
export async function* followLog(
  ctx: Context,
  closed: Promise<void>,
  rawId: string,
  fromOffset: number | null | undefined,
  stillValid: () => Promise<boolean>,
): AsyncGenerator<LogPageOut> {
  let offset = pageOffset(fromOffset);
  const first = await visibleRequest(ctx, rawId);
  if (!first) throw new NotFoundError(`id: no work request ${rawId}`, 'id');
  const id = first.id;
  let woken = false;
  let stopped = false;
  let wake = () => {};
  const ping = () => {
    woken = true;
    wake();
  };
  const streams = [
    ctx.events.subscribe('workRequestLogAppended', String(id))[Symbol.asyncIterator](),
    ctx.events.subscribe('workRequestChanged')[Symbol.asyncIterator](),
  ] as const;
  const pump = async (stream: AsyncIterator<{ id: number }>) => {
    for (let next = await stream.next(); !next.done; next = await stream.next()) if (next.value.id === id) ping();
  };
  const pumps = streams.map((s) => pump(s));
  void closed.then(() => {
    stopped = true;
    ping();
  });
  try {
    await ctx.events.listening?.();
    for (;;) {
      woken = false;
      ctx.renew();
      const wr = await visibleRequest(ctx, String(id));
      if (!wr) return;
      const final = isLogFinal(wr.status); // read before the log: a finished request's output is all there
      for (;;) {
        const page = await readLog(ctx.em, id, offset, LOG_LIMITS.defaultPageBytes);
        const end = page.nextOffset >= page.totalBytes;
        if (page.text || page.nextOffset !== offset || (final && end)) {
          if (!(await stillValid())) return;
          yield { ...page, complete: final && end };
        }
        offset = page.nextOffset;
        if (end) break;
      }
      ctx.renew();
      if (final || stopped) return;
      if (!woken) await new Promise<void>((resolve) => (wake = resolve));
      if (stopped) return;
    }
  } finally {
    await Promise.all(streams.map((s) => s.return?.()));
    await Promise.allSettled(pumps);
  }
}
