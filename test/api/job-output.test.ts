import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { droppedMarker, NUL_REPLACEMENT, rerunMarker } from '../../src/shared/log-text.js';
import { useTestApp } from '../helpers/app.js';
import {
  connectedWorker,
  createUser,
  createWorkspace,
  ERROR_FIELDS,
  memberOf,
  ok,
  sbuild,
  snapshot,
  submitOk,
} from '../helpers/fixtures.js';
import { collect, wsClient } from '../helpers/ws.js';

// A small bound, so that truncation shows with a few kilobytes: a head of 2048 bytes and a tail of at most 2048.
const MAX_LOG_BYTES = 4096;
// No release backoff: one test releases a request and has the same (only) worker run it again.
const t = useTestApp({ input: { maxLogBytes: MAX_LOG_BYTES }, scheduler: { releaseBackoffMs: 0 } });
let url: string;
let worker: string;
let otherWorker: string;
let alice: string;
let carol: string;
const clients: { dispose(): void | Promise<void> }[] = [];

beforeAll(async () => {
  ({ url } = await t.app.start());
  await createWorkspace(t, 'out/private', { isPublic: false });
  await createWorkspace(t, 'out/public');
  alice = await memberOf(t, 'out/private', 'alice');
  carol = await createUser(t, 'carol');
  worker = await connectedWorker(t, 'out-w1', { concurrency: 50 });
  otherWorker = await connectedWorker(t, 'out-w2');
  await ok(t, 'mutation { disableWorker(input: { name: "out-w2" }) { __typename } }');
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
});

/** A request in `workspace`, assigned to out-w1 and started by it. */
async function running(workspace = 'out/private'): Promise<string> {
  const { id } = await submitOk(t, sbuild(workspace));
  await t.app.scheduler.runPass();
  const r = await ok(
    t,
    'mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { status } } }',
    { id },
    worker,
  );
  expect(r.startWorkRequest).toEqual({ __typename: 'WorkRequest', status: 'RUNNING' });
  return id;
}

const APPEND = `mutation($i: AppendWorkRequestLogInput!) { appendWorkRequestLog(input: $i) { __typename ... on WorkRequestLogAck { nextOffset accepted totalBytes } ${ERROR_FIELDS} } }`;

async function append(id: string, offset: number, text: string, token = worker, bytes = Buffer.byteLength(text)) {
  return (await ok(t, APPEND, { i: { id, offset, bytes, text } }, token)).appendWorkRequestLog;
}

const PAGE = 'text offset nextOffset totalBytes droppedBytes truncated complete';

async function page(id: string, offset = 0, limit = 65536, token: string | null = t.adminToken) {
  const r = await ok(
    t,
    `query($id: ID!, $o: Float, $l: Int) { workRequest(id: $id) { log(offset: $o, limit: $l) { ${PAGE} } } }`,
    { id, o: offset, l: limit },
    token,
  );
  return r.workRequest?.log ?? null;
}

/** The whole log, page by page, as a reader following nextOffset gets it. */
async function readAll(id: string, limit = 1000): Promise<string> {
  let offset = 0;
  let text = '';
  for (let i = 0; i < 1000; i++) {
    const p = await page(id, offset, limit);
    text += p.text;
    if (p.nextOffset >= p.totalBytes) return text;
    offset = p.nextOffset;
  }
  throw new Error('the log never ended');
}

const complete = (id: string, result: string, extra: Record<string, unknown> = {}, token = worker) =>
  ok(
    t,
    `mutation($id: ID!, $r: WorkRequestResult!, $e: Int, $s: String) { completeWorkRequest(input: { id: $id, result: $r, exitCode: $e, statusReason: $s }) { __typename ... on WorkRequest { status result exitCode statusReason } ${ERROR_FIELDS} } }`,
    { id, r: result, e: extra.exitCode ?? null, s: extra.statusReason ?? null },
    token,
  ).then((d) => d.completeWorkRequest);

describe('job output', () => {
  it('stores chunks in order, once: a repeat is acknowledged and dropped, a misplaced chunk is refused with the offset to resume from', async () => {
    const id = await running();
    expect(await append(id, 0, 'hello\n')).toEqual({
      __typename: 'WorkRequestLogAck',
      nextOffset: 6,
      accepted: true,
      totalBytes: 6,
    });
    expect(await append(id, 0, 'hello\n')).toEqual({
      __typename: 'WorkRequestLogAck',
      nextOffset: 6,
      accepted: false,
      totalBytes: 6,
    });
    expect(await append(id, 10, 'later\n')).toEqual({
      __typename: 'WorkRequestLogAck',
      nextOffset: 6,
      accepted: false,
      totalBytes: 6,
    });
    expect(await append(id, 3, 'lo\nworld\n')).toEqual({
      __typename: 'WorkRequestLogAck',
      nextOffset: 6,
      accepted: false,
      totalBytes: 6,
    });
    expect(await append(id, 6, 'wörld\n')).toMatchObject({ nextOffset: 13, accepted: true, totalBytes: 13 });
    expect(await page(id)).toEqual({
      text: 'hello\nwörld\n',
      offset: 0,
      nextOffset: 13,
      totalBytes: 13,
      droppedBytes: 0,
      truncated: false,
      complete: false,
    });
    // Pages never cut a character: 8 bytes would end inside "ö".
    expect(await page(id, 0, 8)).toMatchObject({ text: 'hello\nw', nextOffset: 7 });
    expect(await page(id, 7, 100)).toMatchObject({ text: 'örld\n', offset: 7, nextOffset: 13 });
    expect(await page(id, 13)).toMatchObject({ text: '', offset: 13, nextOffset: 13 });
  });

  it('stores text that is not valid Unicode safely, and refuses a raw NUL (the agent sends it as ␀), writing nothing', async () => {
    const id = await running();
    const before = await snapshot(t, ['work_request_log', 'work_request_log_chunk']);
    expect(await append(id, 0, 'a\u0000b\n')).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      path: 'input.text',
    });
    expect(await snapshot(t, ['work_request_log', 'work_request_log_chunk'])).toEqual(before);
    expect(await append(id, 0, `a${NUL_REPLACEMENT}b\ud800c\n`)).toMatchObject({ accepted: true });
    expect((await page(id)).text).toBe(`a${NUL_REPLACEMENT}b\ufffdc\n`);
  });

  it('keeps the head and the rolling tail of a long log, with a marker of what was dropped, within TAGSCHED_MAX_LOG_BYTES', async () => {
    const id = await running();
    const lines = Array.from({ length: 100 }, (_, i) => `line ${String(i).padStart(3, '0')} ${'x'.repeat(90)}\n`); // 100 bytes each
    let offset = 0;
    for (const line of lines) offset = (await append(id, offset, line)).nextOffset;
    const whole = lines.join('');
    const p = await page(id, 0, 65536);
    expect(p).toMatchObject({ offset: 0, nextOffset: 2048, totalBytes: 10_000, truncated: true });
    expect(p.text).toBe(whole.slice(0, 2048));
    // The tail is whole chunks, the most that fit in 2048 bytes: the last 20 lines.
    expect(p.droppedBytes).toBe(10_000 - 2048 - 2000);
    const rest = await page(id, 2048, 65536);
    expect(rest).toMatchObject({ offset: 8000, nextOffset: 10_000 });
    expect(rest.text).toBe(droppedMarker(5952) + whole.slice(8000));
    expect(await readAll(id, 300)).toBe(whole.slice(0, 2048) + droppedMarker(5952) + whole.slice(8000));
    const [{ bytes }] = await t.sql<{ bytes: number }>(
      'select sum(bytes)::int as bytes from work_request_log_chunk where work_request_id = ?',
      [Number(id)],
    );
    expect(bytes).toBe(2048 + 2000);
    // One chunk longer than the whole tail keeps its end.
    const big = `${'y'.repeat(4000)}END\n`;
    await append(id, offset, big);
    const end = await page(id, 2048, 65536);
    expect(end.text).toBe(droppedMarker(10_000 + big.length - 2048 - 2048) + big.slice(big.length - 2048));
  });

  it('marks a new run of the request (a retry) and counts its output from 0', async () => {
    const id = await running();
    await append(id, 0, 'first run\n');
    await ok(
      t,
      'mutation($id: ID!) { releaseWorkRequest(input: { id: $id, reason: "test" }) { __typename } }',
      { id },
      worker,
    );
    await t.app.scheduler.runPass();
    await ok(t, 'mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }', { id }, worker);
    expect(await append(id, 10, 'stale\n')).toMatchObject({ nextOffset: 0, accepted: false });
    expect(await append(id, 0, 'second run\n')).toMatchObject({ nextOffset: 11, accepted: true });
    expect((await page(id)).text).toBe(`first run\n${rerunMarker()}second run\n`);
  });

  it('records the exit code, and a FAILURE or ERROR reason: the one given, else the last 5 non-blank lines, else what is known', async () => {
    const failed = await running();
    await append(failed, 0, 'step 1\n\n   \nstep 2\nstep 3\nstep 4\nstep 5\nerror: the build failed\n\n');
    expect(await complete(failed, 'FAILURE', { exitCode: 1 })).toEqual({
      __typename: 'WorkRequest',
      status: 'COMPLETED',
      result: 'FAILURE',
      exitCode: 1,
      statusReason: 'step 2\nstep 3\nstep 4\nstep 5\nerror: the build failed',
    });
    const explained = await running();
    await append(explained, 0, 'noise\n');
    expect(
      await complete(explained, 'ERROR', { exitCode: 2, statusReason: `  out of disk space ${'!'.repeat(2000)}` }),
    ).toMatchObject({ exitCode: 2 });
    const [reason] = await t.sql<{ status_reason: string }>('select status_reason from work_request where id = ?', [
      Number(explained),
    ]);
    expect(Array.from(reason.status_reason)).toHaveLength(1000);
    expect(reason.status_reason).toMatch(/^out of disk space !+…$/);
    const silent = await running();
    expect(await complete(silent, 'ERROR', { exitCode: 7 })).toMatchObject({
      exitCode: 7,
      statusReason: 'exit code 7, and no output',
    });
    const fine = await running();
    await append(fine, 0, 'all good\n');
    expect(await complete(fine, 'SUCCESS', { exitCode: 0 })).toMatchObject({
      result: 'SUCCESS',
      exitCode: 0,
      statusReason: null,
    });
    expect(await page(fine)).toMatchObject({ text: 'all good\n', complete: true });
    // A completed request takes no more output.
    expect(await append(fine, 9, 'late\n')).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
  });

  it('merges the small chunks of a finished log, and the text stays the same', async () => {
    const id = await running();
    let offset = 0;
    for (let i = 0; i < 30; i++) offset = (await append(id, offset, `tick ${i}\n`)).nextOffset;
    const before = await readAll(id);
    await complete(id, 'SUCCESS', { exitCode: 0 });
    const [{ n }] = await t.sql<{ n: number }>(
      'select count(*)::int as n from work_request_log_chunk where work_request_id = ?',
      [Number(id)],
    );
    expect(n).toBe(1);
    expect(await readAll(id)).toBe(before);
  });

  it('refuses bad chunks with a typed error, writing nothing', async () => {
    const id = await running();
    const tables = ['work_request_log', 'work_request_log_chunk'];
    const before = await snapshot(t, tables);
    expect(await append(id, -1, 'x')).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      path: 'input.offset',
    });
    expect(await append(id, 1.5, 'x')).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      path: 'input.offset',
    });
    expect(await append(id, 0, 'x', worker, 2 ** 60)).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      path: 'input.bytes',
    });
    expect(await append(id, 0, 'z'.repeat(1024 * 1024 + 1))).toMatchObject({
      __typename: 'InputError',
      code: 'LOG_CHUNK_TOO_LARGE',
      path: 'input.text',
    });
    expect(await append('nope', 0, 'x')).toMatchObject({
      __typename: 'InputError',
      code: 'INVALID_INPUT',
      path: 'input.id',
    });
    expect(await snapshot(t, tables)).toEqual(before);
    for (const limit of [0, 2 * 1024 * 1024]) {
      const r = await t.gql(`query($id: ID!, $l: Int) { workRequest(id: $id) { log(limit: $l) { text } } }`, {
        id,
        l: limit,
      });
      expect(r.errors?.[0].extensions?.code).toBe('INVALID_INPUT');
    }
  });
});

describe('who may write and read a log', () => {
  it('only the worker holding the request appends to it; others are refused and change nothing', async () => {
    const id = await running();
    const tables = ['work_request_log', 'work_request_log_chunk'];
    const before = await snapshot(t, tables);
    expect(await append(id, 0, 'x', otherWorker)).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    expect(await append(id, 0, 'x', alice)).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    expect(await append(id, 0, 'x', t.adminToken)).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    const anonymous = await t.gql(APPEND, { i: { id, offset: 0, bytes: 1, text: 'x' } }, null);
    expect(anonymous.data!.appendWorkRequestLog).toMatchObject({
      __typename: 'UnauthenticatedError',
      code: 'UNAUTHENTICATED',
    });
    expect(await snapshot(t, tables)).toEqual(before);
  });

  it('the log of a private workspace is not shown to an outsider or an anonymous caller, and is to a member', async () => {
    const id = await running('out/private');
    await append(id, 0, 'secret output\n');
    expect(await page(id, 0, 100, null)).toBeNull();
    expect(await page(id, 0, 100, carol)).toBeNull();
    expect(await page(id, 0, 100, otherWorker)).toBeNull();
    expect(await page(id, 0, 100, alice)).toMatchObject({ text: 'secret output\n' });
    expect(await page(id, 0, 100, worker)).toMatchObject({ text: 'secret output\n' });
    // Nor through the subscription: the same answer as for a request that does not exist.
    for (const token of [null, carol]) {
      const c = wsClient(url, token);
      clients.push(c.client);
      const sub = collect(c.client, `subscription($id: ID!) { workRequestLog(id: $id) { text } }`, { id });
      await expect(sub.next(1, 10_000)).rejects.toThrow(new RegExp(`no work request ${id}`));
      expect(sub.items).toEqual([]);
    }
    const publicId = await running('out/public');
    await append(publicId, 0, 'public output\n');
    expect(await page(publicId, 0, 100, null)).toMatchObject({ text: 'public output\n' });
  });

  it('follows a log live: what exists, then each new chunk, and it ends when the request completes', async () => {
    const id = await running('out/private');
    await append(id, 0, 'before\n');
    const c = wsClient(url, alice);
    clients.push(c.client);
    const sub = collect<{ workRequestLog: { text: string; nextOffset: number; complete: boolean } }>(
      c.client,
      `subscription($id: ID!) { workRequestLog(id: $id) { text nextOffset complete } }`,
      { id },
    );
    expect(await sub.next(1)).toEqual([{ workRequestLog: { text: 'before\n', nextOffset: 7, complete: false } }]);
    await append(id, 7, 'during 1\n');
    await sub.next(2);
    await append(id, 16, 'during 2\n');
    await sub.next(3);
    await complete(id, 'FAILURE', { exitCode: 1 });
    await sub.completed;
    const pages = sub.items.map((i) => i.workRequestLog);
    expect(pages.map((p) => p.text).join('')).toBe('before\nduring 1\nduring 2\n');
    expect(pages.at(-1)).toMatchObject({ nextOffset: 25, complete: true });
    expect(pages.slice(0, -1).every((p) => !p.complete)).toBe(true);
    // A follower starting after the end gets everything at once, and the end.
    const late = collect<{ workRequestLog: { text: string; complete: boolean } }>(
      c.client,
      `subscription($id: ID!) { workRequestLog(id: $id, offset: 7) { text complete } }`,
      {
        id,
      },
    );
    await late.completed;
    expect(late.items).toEqual([{ workRequestLog: { text: 'during 1\nduring 2\n', complete: true } }]);
  });
});
