/**
 * `work log`: a work request's output as its handler wrote it, page after page, or followed live
 * through the workRequestLog subscription until the request is finished (or Ctrl-C).
 */
import type { Command } from 'commander';
import { integer } from './arguments.js';
import type { Ctx, Register } from './command-context.js';
import { terminalSafe, terminalSafeOutput } from './terminal-text.js';
import { fetchOne } from './work-lookup.js';

const LOG_FIELDS = 'offset text nextOffset totalBytes truncated droppedBytes complete';
const LOG_PAGE = `query WorkRequestLog($id: ID!, $offset: Float, $limit: Int) {
  workRequest(id: $id) { id status result exitCode statusReason log(offset: $offset, limit: $limit) { ${LOG_FIELDS} } }
}`;
const FOLLOW_LOG = `subscription FollowWorkRequestLog($id: ID!, $offset: Float) { workRequestLog(id: $id, offset: $offset) { ${LOG_FIELDS} } }`;
const END = `query WorkRequestEnd($id: ID!) { workRequest(id: $id) { id status result exitCode statusReason } }`;
/** Bytes of output asked for per page (the API's most; a page costs a unit per KiB). */
const LOG_PAGE_BYTES = 1_048_576;

interface LogPage {
  offset: number;
  text: string;
  nextOffset: number;
  totalBytes: number;
  truncated: boolean;
  droppedBytes: number;
  complete: boolean;
}

interface WorkEnd {
  id: string;
  status: string;
  result: string | null;
  exitCode: number | null;
  statusReason: string | null;
}

/** How a request ended (or where it is), for the line after its log. */
function endText(w: WorkEnd): string {
  const exit = w.exitCode !== null ? `, exit code ${w.exitCode}` : '';
  const reason = w.statusReason
    ? `: ${terminalSafe(w.statusReason)
        .trim()
        .replace(/\s*\n\s*/g, ' | ')}`
    : '';
  return `(work request ${w.id}: ${w.status}${w.result ? ` ${w.result}` : ''}${exit}${reason})`;
}

/**
 * Prints a request's output from `offset`: page after page up to what there is, or with `follow`,
 * live through the workRequestLog subscription until the request is finished (or Ctrl-C). The
 * output goes to stdout as it is when stdout is not a terminal (a file or a pipe gets the job's own
 * bytes); on a terminal only its colours pass, every other escape sequence and control is removed
 * (terminalSafeOutput), since a handler wrote it. Where it ended goes to stderr, made terminal-safe.
 * --json: one JSON document a page.
 */
async function log(ctx: Ctx, id: string, opts: { follow?: boolean; offset?: string }) {
  const api = ctx.api({ raw: true });
  const { out, io } = ctx;
  let offset = opts.offset === undefined ? 0 : integer('--offset', opts.offset, 0);
  const first = (await fetchOne<WorkEnd & { log: LogPage }>(ctx, LOG_PAGE, id, { offset, limit: LOG_PAGE_BYTES }, true))
    .workRequest;
  const onTerminal = out.width !== null;
  const show = (page: LogPage, data: unknown) =>
    out.json ? out.line(JSON.stringify(data)) : out.write(onTerminal ? terminalSafeOutput(page.text) : page.text);
  if (!opts.follow) {
    let page = first.log;
    show(page, { workRequest: first });
    while (page.nextOffset < page.totalBytes && page.nextOffset > offset) {
      offset = page.nextOffset;
      const data = await api.query<{ workRequest: (WorkEnd & { log: LogPage }) | null }>(LOG_PAGE, {
        id,
        offset,
        limit: LOG_PAGE_BYTES,
      });
      if (!data.workRequest) break;
      page = data.workRequest.log;
      show(page, data);
    }
    if (!out.json) io.stderr.write(`${endText(first)}\n`);
    return;
  }
  let complete = false;
  await api.subscribe(
    FOLLOW_LOG,
    { id, offset },
    (data) => {
      const page = data.workRequestLog as LogPage;
      complete ||= page.complete;
      show(page, data);
    },
    io.signal,
  );
  if (complete && !out.json) {
    const end = await api.query<{ workRequest: WorkEnd | null }>(END, { id });
    if (end.workRequest) io.stderr.write(`${endText(end.workRequest)}\n`);
  }
}

/** Adds `log` to the `work` command group. */
export function addLogCommand(work: Command, action: Parameters<Register>[1]): void {
  action(
    work
      .command('log <id>')
      .description(
        "Prints a work request's output (stdout and stderr as its handler wrote them); --follow keeps printing until it is finished",
      )
      .option('-f, --follow', 'follow the output live until the request is finished (Ctrl-C stops following)')
      .option('--offset <bytes>', 'start at this byte offset (default 0)')
      .addHelpText(
        'after',
        `
The output goes to stdout as it is; how the request ended (status, result, exit code, reason) to
stderr. A log over the server's TAGSCHED_MAX_LOG_BYTES keeps its head and tail, with a line saying
how much was dropped between them. With --json, one JSON document (the GraphQL data) a page.

Examples:
  tagsched-admin work log 42
  tagsched-admin work log 42 --follow
  tagsched-admin work log 42 > build-42.log`,
      ),
    (ctx, [id], opts) => log(ctx, id, opts),
  );
}
