/**
 * Job output (docs/design.md: output and results): the agent appends the handler's output in chunks while it runs, readers
 * page through it or follow it.
 *
 * Vocabulary. A log's *positions* are byte offsets in the UTF-8 text of everything the request's
 * handlers wrote (NUL stored as ␀, bytes that are not UTF-8 as U+FFFD). The *head* is the first
 * TAGSCHED_MAX_LOG_BYTES/2 bytes, kept for good; the *tail* is the last TAGSCHED_MAX_LOG_BYTES/2 at
 * most, rolling: when it grows past that, its oldest chunks are deleted, and what lies between the
 * head and the tail was *dropped* (a reader gets a marker line there instead). The *agent offset*
 * counts the bytes of the current run's output as the agent read them from the handler: the agent
 * says where each chunk starts, so a chunk sent again (its answer was lost) is recognised and
 * dropped, and a chunk that does not start where the last one ended is refused with the offset the
 * agent must resume from. Nothing lost, nothing twice, order kept.
 *
 * Storage. A small state row per request (`work_request_log`, updated per chunk) and the text as
 * rows of `work_request_log_chunk`, one per agent batch: no growing value is ever rewritten. When the
 * request completes, runs of small chunks are merged into bigger ones (compactLog).
 *
 * Locks. An append holds the request row FOR SHARE (its worker and status cannot change under it)
 * and its state row FOR UPDATE (appends of one request go one at a time); events are published
 * after the commit.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ERROR_CODES, InputError, InvalidStateError, NotFoundError } from '../../core/errors.js';
import { isActive, isFinished } from '../../core/work-request-status.js';
import type { Events } from '../../storage/events.js';
import { requireWorker, type Viewer } from '../identity/auth.js';
import {
  droppedMarker,
  lastLines,
  RERUN_MARKER_START,
  rerunMarker,
  sanitizeLogText,
  utf8BoundaryAfter,
  utf8PrefixLength,
} from '../../shared/log-text.js';

/** Sizes of job output, in bytes. */
export const LOG_LIMITS = {
  /** The largest chunk text one append takes. */
  maxChunkBytes: 1024 * 1024,
  /** A page of `WorkRequest.log` when the reader names no limit, and the largest one. */
  defaultPageBytes: 64 * 1024,
  maxPageBytes: 1024 * 1024,
  /** Completion merges consecutive chunks into rows of up to this size. */
  compactedChunkBytes: 256 * 1024,
} as const;

/** What an append answers: where the agent's next chunk must start. */
export interface AppendAnswer {
  /** The agent offset the server has reached: the next chunk starts here. */
  readonly nextOffset: number;
  /** Whether this chunk was added (false: a repeat already stored, or it did not start at nextOffset). */
  readonly accepted: boolean;
  /** Bytes of the whole log so far (positions), kept or not. */
  readonly totalBytes: number;
}

/** One chunk from an agent. */
export interface AppendInput {
  id: string;
  /** Where the chunk starts, in the agent's count of the run's output bytes. */
  offset: number;
  /** How many bytes of the run's output the chunk holds, in the agent's count. */
  bytes: number;
  text: string;
}

function wholeNumber(value: number, path: string): number {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new InputError(ERROR_CODES.INVALID_INPUT, `${path}: ${value} is not a whole number of bytes ≥ 0`, path);
  return value;
}

function requestId(raw: string): number {
  const id = Number(raw);
  if (!Number.isSafeInteger(id) || id <= 0)
    throw new InputError(ERROR_CODES.INVALID_INPUT, `input.id: "${raw}" is not a work request id`, 'input.id');
  return id;
}

/** The worker adds a chunk of its run's output to the log of a request it holds (ASSIGNED or RUNNING). */
export async function appendLog(
  deps: { em: EntityManager; viewer: Viewer; events: Events; maxLogBytes: number },
  input: AppendInput,
): Promise<AppendAnswer> {
  const me = requireWorker(deps.viewer);
  const id = requestId(input.id);
  const offset = wholeNumber(input.offset, 'input.offset');
  const bytes = wholeNumber(input.bytes, 'input.bytes');
  const size = Buffer.byteLength(input.text, 'utf8');
  if (size > LOG_LIMITS.maxChunkBytes) {
    throw new InputError(
      ERROR_CODES.LOG_CHUNK_TOO_LARGE,
      `input.text: ${size} bytes is over the limit of ${LOG_LIMITS.maxChunkBytes} per chunk: send it in parts`,
      'input.text',
    );
  }
  const answer = await deps.em.transactional(async (tx) => {
    const [wr] = await tx.execute<{ status: string; worker_id: number | null }[]>(
      `select status, worker_id from work_request where id = ? for share`,
      [id],
    );
    // To a worker, another worker's request does not exist.
    if (!wr || wr.worker_id !== me.id)
      throw new NotFoundError(`input.id: no work request ${input.id} assigned to you`, 'input.id');
    if (!isActive(wr.status))
      throw new InvalidStateError(
        `work request ${id} is ${wr.status}: output is taken only while it is ASSIGNED or RUNNING`,
      );
    const [log] = await tx.execute<
      { agent_offset: string; total_bytes: string; head_bytes: string; tail_start: string; same_run: boolean }[]
    >(
      `insert into work_request_log (work_request_id) values (?)
       on conflict (work_request_id) do update set work_request_id = excluded.work_request_id
       returning agent_offset, total_bytes, head_bytes, tail_start,
                 run_started_at is not distinct from (select started_at from work_request where id = ?) as same_run`,
      [id, id],
    );
    const state = { total: Number(log.total_bytes), head: Number(log.head_bytes), tailStart: Number(log.tail_start) };
    // A new run of the request (a retry) counts its output from 0; its output follows the old run's.
    const agentOffset = log.same_run ? Number(log.agent_offset) : 0;
    if (offset !== agentOffset || (bytes === 0 && !input.text)) {
      // Nothing is written: a new run stays new (and gets its marker) until its first chunk is stored.
      return { nextOffset: agentOffset, accepted: false, totalBytes: state.total };
    }
    // The first output of a new run (a retry) is marked, once, after the output of the run before.
    const marker = !log.same_run && state.total > 0 && Number(log.agent_offset) > 0 ? rerunMarker() : '';
    const text = marker + sanitizeLogText(input.text);
    await appendText(tx, id, state, Buffer.from(text, 'utf8'), deps.maxLogBytes);
    await saveState(tx, id, state, agentOffset + bytes);
    return { nextOffset: agentOffset + bytes, accepted: true, totalBytes: state.total };
  });
  if (answer.accepted) deps.events.publish('workRequestLogAppended', String(id), { id, totalBytes: answer.totalBytes });
  return answer;
}

interface LogState {
  total: number;
  head: number;
  tailStart: number;
}

async function saveState(tx: EntityManager, id: number, s: LogState, agentOffset: number): Promise<void> {
  await tx.execute(
    `update work_request_log set agent_offset = ?, total_bytes = ?, head_bytes = ?, tail_start = ?, updated_at = now(),
            run_started_at = (select started_at from work_request where id = ?)
      where work_request_id = ?`,
    [agentOffset, s.total, s.head, s.tailStart, id, id],
  );
}

/**
 * Adds `buf` at the end of the log: into the head while it has room, the rest into the tail; a
 * piece longer than the tail keeps its end only, and the oldest tail chunks go until the tail fits.
 */
async function appendText(tx: EntityManager, id: number, s: LogState, buf: Buffer, maxLogBytes: number): Promise<void> {
  const headLimit = Math.floor(maxLogBytes / 2);
  const tailLimit = maxLogBytes - headLimit;
  const rows: { start: number; data: Buffer }[] = [];
  if (s.total === s.head && s.head < headLimit) {
    const n = utf8PrefixLength(buf, headLimit - s.head);
    if (n > 0) rows.push({ start: s.total, data: buf.subarray(0, n) });
    s.total += n;
    s.head += n;
    s.tailStart = s.total;
    buf = buf.subarray(n);
  }
  let skipped = 0;
  if (buf.length > tailLimit) {
    skipped = utf8BoundaryAfter(buf, buf.length - tailLimit);
    buf = buf.subarray(skipped);
    s.total += skipped;
  }
  if (buf.length) {
    rows.push({ start: s.total, data: buf });
    s.total += buf.length;
  }
  if (!rows.length) return;
  await tx.execute(
    `insert into work_request_log_chunk (work_request_id, start, bytes, data) values ${rows.map(() => '(?, ?, ?, ?)').join(', ')}`,
    rows.flatMap((r) => [id, r.start, r.data.length, r.data.toString('utf8')]),
  );
  if (s.total - s.tailStart <= tailLimit && !skipped) return;
  // The tail starts at the first chunk that ends within the last tailLimit bytes (after a piece that
  // was itself cut, at that piece): the chunks before it, down to the head, are dropped.
  const cut = skipped ? s.total - buf.length : Math.max(s.head, s.total - tailLimit);
  const [{ tail_start }] = await tx.execute<{ tail_start: string | null }[]>(
    `with keep as (select min(start) as s from work_request_log_chunk where work_request_id = ? and start >= ?),
          gone as (delete from work_request_log_chunk c using keep
                    where c.work_request_id = ? and c.start >= ? and c.start < keep.s returning c.start)
     select (select s from keep) as tail_start, (select count(*) from gone) as deleted`,
    [id, cut, id, s.head],
  );
  s.tailStart = tail_start === null ? s.total : Number(tail_start);
}

/** A page of a log. */
export interface LogPage {
  readonly text: string;
  /** Where the page starts (after the dropped part, when the offset asked for fell in it). */
  readonly offset: number;
  /** The offset of the next page; equal to totalBytes once the reader has everything so far. */
  readonly nextOffset: number;
  readonly totalBytes: number;
  readonly droppedBytes: number;
}

/** The bytes of output a request has received so far, kept or not (0 without a log). */
export async function logTotalBytes(em: EntityManager, id: number): Promise<number> {
  const [log] = await em.execute<{ total_bytes: string }[]>(
    `select total_bytes from work_request_log where work_request_id = ?`,
    [id],
  );
  return Number(log?.total_bytes ?? 0);
}

/**
 * Reads up to `limit` bytes of a log from `offset` (cut at character boundaries). A page never
 * spans the dropped part: the page that reaches it starts with the marker and goes on in the tail.
 */
export async function readLog(em: EntityManager, id: number, offset: number, limit: number): Promise<LogPage> {
  const [log] = await em.execute<{ total_bytes: string; head_bytes: string; tail_start: string }[]>(
    `select total_bytes, head_bytes, tail_start from work_request_log where work_request_id = ?`,
    [id],
  );
  if (!log) return { text: '', offset: 0, nextOffset: 0, totalBytes: 0, droppedBytes: 0 };
  const total = Number(log.total_bytes);
  const head = Number(log.head_bytes);
  const tailStart = Number(log.tail_start);
  const dropped = tailStart - head;
  let from = Math.min(Math.max(0, offset), total);
  let marker = '';
  if (dropped > 0 && from >= head && from < tailStart) {
    marker = droppedMarker(dropped);
    from = tailStart;
  }
  const end = Math.min(total, from + limit, from < head && dropped > 0 ? head : Infinity);
  if (end <= from) return { text: marker, offset: from, nextOffset: from, totalBytes: total, droppedBytes: dropped };
  const rows = await em.execute<{ start: string; data: string }[]>(
    `select start, data from work_request_log_chunk where work_request_id = ? and start < ? and start + bytes > ? order by start`,
    [id, end, from],
  );
  if (!rows.length) return { text: marker, offset: from, nextOffset: end, totalBytes: total, droppedBytes: dropped };
  const first = Number(rows[0].start);
  const buf = Buffer.from(rows.map((r) => r.data).join(''), 'utf8');
  const a = utf8BoundaryAfter(buf, from - first);
  const b = utf8PrefixLength(buf, end - first);
  return {
    text: marker + buf.subarray(a, Math.max(a, b)).toString('utf8'),
    offset: first + a,
    nextOffset: first + Math.max(a, b),
    totalBytes: total,
    droppedBytes: dropped,
  };
}

/**
 * The last lines of the current run's output that are not blank (for a FAILURE or ERROR with no
 * reason given), or null when that run wrote nothing.
 */
export async function lastOutputLines(em: EntityManager, id: number): Promise<string | null> {
  const rows = await em.execute<{ data: string }[]>(
    `select right(c.data, 8192) as data from work_request_log_chunk c
       join work_request_log l on l.work_request_id = c.work_request_id
       join work_request w on w.id = c.work_request_id
      where c.work_request_id = ? and l.run_started_at is not distinct from w.started_at
      order by c.start desc limit 3`,
    [id],
  );
  const text = rows
    .map((r) => r.data)
    .reverse()
    .join('');
  const marker = text.lastIndexOf(RERUN_MARKER_START);
  return lastLines(marker < 0 ? text : text.slice(text.indexOf('\n', marker + 1) + 1));
}

/** Whether a request can get no more output: it is finished. */
export const isLogFinal = (status: string): boolean => isFinished(status);

/**
 * Merges runs of consecutive chunks into rows of up to LOG_LIMITS.compactedChunkBytes, once the
 * request is finished (a slow trickle of output makes many small rows). Head and tail are never
 * merged together. Runs in the caller's transaction; the text never leaves PostgreSQL.
 */
export async function compactLog(em: EntityManager, id: number): Promise<void> {
  const chunks = (
    await em.execute<{ start: string; bytes: number }[]>(
      `select start, bytes from work_request_log_chunk where work_request_id = ? order by start`,
      [id],
    )
  ).map((c) => ({
    start: Number(c.start),
    bytes: c.bytes,
  }));
  if (chunks.length < 2) return;
  const [{ head_bytes }] = await em.execute<{ head_bytes: string }[]>(
    `select head_bytes from work_request_log where work_request_id = ?`,
    [id],
  );
  const head = Number(head_bytes);
  const groups: { first: number; last: number; end: number; bytes: number; members: number }[] = [];
  for (const c of chunks) {
    const g = groups.at(-1);
    if (
      g &&
      g.end === c.start &&
      g.first < head === c.start < head &&
      g.bytes + c.bytes <= LOG_LIMITS.compactedChunkBytes
    ) {
      g.last = c.start;
      g.end = c.start + c.bytes;
      g.bytes += c.bytes;
      g.members++;
    } else groups.push({ first: c.start, last: c.start, end: c.start + c.bytes, bytes: c.bytes, members: 1 });
  }
  for (const g of groups.filter((x) => x.members > 1)) {
    await em.execute(
      `update work_request_log_chunk c set data = m.data, bytes = m.bytes
         from (select string_agg(data, '' order by start) as data, sum(bytes)::int as bytes
                 from work_request_log_chunk where work_request_id = ? and start between ? and ?) m
        where c.work_request_id = ? and c.start = ?`,
      [id, g.first, g.last, id, g.first],
    );
    await em.execute(`delete from work_request_log_chunk where work_request_id = ? and start > ? and start <= ?`, [
      id,
      g.first,
      g.last,
    ]);
  }
}
