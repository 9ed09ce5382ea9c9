import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TransientError } from '../../src/agent/client.js';
import { completeUtf8Length, MAX_CHUNK_BYTES, startShipper, type ShipperDeps } from '../../src/agent/log-shipper.js';
import type { Answer, LogChunk } from '../../src/agent/operations.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-shipper-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;
const newFile = () => {
  const file = path.join(dir, `log-${n++}`);
  fs.writeFileSync(file, '');
  return file;
};

/** A server that keeps the protocol of appendWorkRequestLog: a chunk is stored only at its offset. */
function fakeServer(options: { loseAnswers?: number; rewindOnce?: number } = {}) {
  let offset = 0;
  let lose = options.loseAnswers ?? 0;
  let rewind = options.rewindOnce;
  const stored: string[] = [];
  const calls: LogChunk[] = [];
  return {
    stored,
    calls,
    text: () => stored.join(''),
    async appendWorkRequestLog(chunk: LogChunk): Promise<Answer<{ nextOffset: number; accepted: boolean }>> {
      calls.push(chunk);
      let accepted = false;
      if (chunk.offset === offset) {
        stored.push(chunk.text);
        offset += chunk.bytes;
        accepted = true;
      }
      if (rewind !== undefined && accepted) {
        // As if the state were behind: the agent must go back there (the stored text is cut too).
        const keep = Buffer.from(stored.join('')).subarray(0, rewind).toString();
        stored.splice(0, stored.length, keep);
        offset = rewind;
        rewind = undefined;
        return { ok: true, value: { nextOffset: offset, accepted: false } };
      }
      if (lose > 0) {
        lose--;
        throw new TransientError('the answer was lost');
      }
      return { ok: true, value: { nextOffset: offset, accepted } };
    },
  };
}

const retrying: ShipperDeps['send'] = async (_op, _fields, fn) => {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof TransientError)) throw err;
    }
  }
};

const tick = (ms = 30) => new Promise((r) => setTimeout(r, ms));

describe('completeUtf8Length', () => {
  it.each([
    ['plain ASCII', Buffer.from('abc'), 3],
    ['a whole 2-byte character', Buffer.from('aé'), 3],
    ['a 2-byte character cut after its first byte', Buffer.from('aé').subarray(0, 2), 1],
    ['a 4-byte character cut after three bytes', Buffer.from('a😀').subarray(0, 4), 1],
    ['a whole 4-byte character', Buffer.from('a😀'), 5],
    ['a byte that is never UTF-8 (0xff) counts as whole', Buffer.from([0x61, 0xff]), 2],
    ['a stray continuation byte counts as whole', Buffer.from([0x61, 0x80]), 2],
    ['empty', Buffer.alloc(0), 0],
  ])('%s', (_what, buf, expected) => expect(completeUtf8Length(buf)).toBe(expected));
});

describe('the log shipper', () => {
  it('sends the output in order as it is written, never cutting a character, and has it all on the server when finish() resolves', async () => {
    const file = newFile();
    const server = fakeServer();
    const refused: unknown[] = [];
    const shipper = startShipper({
      id: '1',
      file,
      api: server,
      intervalMs: 10,
      send: retrying,
      onRefused: (e) => refused.push(e),
    });
    const euro = Buffer.from('€');
    fs.appendFileSync(file, Buffer.concat([Buffer.from('line 1\nprice: '), euro.subarray(0, 1)]));
    await tick(60);
    fs.appendFileSync(file, Buffer.concat([euro.subarray(1), Buffer.from('5\nline 3\n')]));
    await tick(60);
    fs.appendFileSync(file, 'line 4 with no newline');
    await shipper.finish();
    expect(server.text()).toBe('line 1\nprice: €5\nline 3\nline 4 with no newline');
    expect(server.calls.length).toBeGreaterThanOrEqual(2);
    expect(server.calls.every((c) => !c.text.includes('\ufffd'))).toBe(true);
    expect(server.calls.map((c) => c.offset)).toEqual(
      server.calls.map((_c, i) => server.calls.slice(0, i).reduce((s, x) => s + x.bytes, 0)),
    );
    expect(refused).toEqual([]);
  });

  it('sends a chunk whose answer was lost again from the same offset, and the server keeps it once', async () => {
    const file = newFile();
    const server = fakeServer({ loseAnswers: 2 });
    fs.writeFileSync(file, 'first\n');
    const shipper = startShipper({
      id: '1',
      file,
      api: server,
      intervalMs: 10,
      send: retrying,
      onRefused: () => undefined,
    });
    await tick(60);
    fs.appendFileSync(file, 'second\n');
    await shipper.finish();
    expect(server.text()).toBe('first\nsecond\n');
    expect(server.calls.filter((c) => c.offset === 0).length).toBeGreaterThanOrEqual(2);
  });

  it('goes back to where the server says it stands', async () => {
    const file = newFile();
    const server = fakeServer({ rewindOnce: 3 });
    fs.writeFileSync(file, 'abcdefgh');
    const shipper = startShipper({
      id: '1',
      file,
      api: server,
      intervalMs: 10,
      send: retrying,
      onRefused: () => undefined,
    });
    await shipper.finish();
    expect(server.text()).toBe('abcdefgh');
    expect(server.calls.map((c) => [c.offset, c.text])).toEqual([
      [0, 'abcdefgh'],
      [3, 'defgh'],
    ]);
  });

  it('sends a backlog in pieces of at most MAX_CHUNK_BYTES, one after the other', async () => {
    const file = newFile();
    const server = fakeServer();
    const big = 'x'.repeat(MAX_CHUNK_BYTES * 2 + 100);
    fs.writeFileSync(file, big);
    const shipper = startShipper({
      id: '1',
      file,
      api: server,
      intervalMs: 60_000,
      send: retrying,
      onRefused: () => undefined,
    });
    await shipper.finish();
    expect(server.calls.map((c) => c.bytes)).toEqual([MAX_CHUNK_BYTES, MAX_CHUNK_BYTES, 100]);
    expect(server.text()).toBe(big);
  });

  it('sends bytes that are not UTF-8 as U+FFFD and NUL as ␀ (the server refuses NUL); an incomplete character at the very end is sent too', async () => {
    const file = newFile();
    const server = fakeServer();
    fs.writeFileSync(file, Buffer.from([0x61, 0xff, 0x00, 0x62, 0xe2, 0x82]));
    const shipper = startShipper({
      id: '1',
      file,
      api: server,
      intervalMs: 10,
      send: retrying,
      onRefused: () => undefined,
    });
    await shipper.finish();
    expect(server.text()).toBe('a\ufffd\u2400b\ufffd');
    expect(server.calls.at(-1)!.offset + server.calls.at(-1)!.bytes).toBe(6);
  });

  it('stops when the server refuses the output (the request is no longer this worker’s)', async () => {
    const file = newFile();
    fs.writeFileSync(file, 'output\n');
    const refused: unknown[] = [];
    let calls = 0;
    const shipper = startShipper({
      id: '9',
      file,
      api: {
        appendWorkRequestLog: async () => {
          calls++;
          return {
            ok: false,
            error: { type: 'NotFoundError', code: 'NOT_FOUND', message: 'no work request 9 assigned to you' },
          };
        },
      },
      intervalMs: 10,
      send: retrying,
      onRefused: (e) => refused.push(e),
    });
    await tick(60);
    fs.appendFileSync(file, 'more\n');
    await shipper.finish();
    expect(calls).toBe(1);
    expect(refused).toEqual([
      { type: 'NotFoundError', code: 'NOT_FOUND', message: 'no work request 9 assigned to you' },
    ]);
  });

  it('finishes at once when the handler never started (no log file)', async () => {
    const server = fakeServer();
    const shipper = startShipper({
      id: '1',
      file: path.join(dir, 'missing', 'log'),
      api: server,
      intervalMs: 10,
      send: retrying,
      onRefused: () => undefined,
    });
    await shipper.finish();
    expect(server.calls).toEqual([]);
  });
});
