/**
 * Sends a run's output to the server while the handler writes it. The run's local log file
 * (`runs/<id>/log`, stdout and stderr in the order they were written) is the buffer: the shipper
 * reads it from the offset the server acknowledged, so a chunk whose answer was lost is sent again
 * from there, the server stores it once (it knows its offset), and nothing piles up in memory while
 * the server is out of reach. Chunks are batched: every interval, all there is (a bigger backlog
 * goes in pieces, one after the other), always cut between two UTF-8 characters. Bytes that are not
 * UTF-8 are sent as U+FFFD and NUL as ␀ (U+2400): the server takes neither raw.
 */
import { constants as fsc } from 'node:fs';
import fs from 'node:fs/promises';
import { NUL_REPLACEMENT } from '../shared/log-text.js';
import type { Answer, Api } from './operations.js';

/** Most bytes one chunk carries (the server takes up to 1 MiB of text; bytes that are not UTF-8 grow into 3-byte U+FFFD). */
export const MAX_CHUNK_BYTES = 256 * 1024;

/** What the shipper needs from the agent. */
export interface ShipperDeps {
  id: string;
  file: string;
  api: Pick<Api, 'appendWorkRequestLog'>;
  /** How long output may wait to be batched with more, in milliseconds. */
  intervalMs: number;
  /**
   * Calls the server until it answers (the agent's retries: transient failures wait and try again,
   * a refused token or the agent's end throws).
   */
  send<T>(operation: string, fields: Record<string, unknown>, fn: () => Promise<Answer<T>>): Promise<Answer<T>>;
  /** The server refused the output (the request is no longer this worker's): no more is sent. */
  onRefused(error: { type: string; code: string; message: string }): void;
}

/** A running shipper. */
export interface Shipper {
  /** The handler is done: sends the rest and resolves once the server has it all (or will take no more). */
  finish(): Promise<void>;
}

/**
 * How many bytes of `buf` form whole UTF-8 characters: a sequence cut at the end is held back
 * (bytes that can never be UTF-8 count as whole: the decoder turns each into U+FFFD).
 */
export function completeUtf8Length(buf: Uint8Array): number {
  for (let back = 1; back <= Math.min(4, buf.length); back++) {
    const byte = buf[buf.length - back];
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const need =
      byte >= 0xf0 && byte <= 0xf4 ? 4 : byte >= 0xe0 && byte < 0xf0 ? 3 : byte >= 0xc2 && byte < 0xe0 ? 2 : 1;
    return need > back ? buf.length - back : buf.length;
  }
  return buf.length;
}

/** Starts shipping `file`; it reads nothing until there is something to read. */
export function startShipper(deps: ShipperDeps): Shipper {
  const decoder = new TextDecoder('utf-8', { fatal: false });
  let acked = 0; // the server's count of this run's bytes
  let ended = false;
  let wake = () => {};

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  async function run(): Promise<void> {
    let handle: fs.FileHandle | null = null;
    try {
      for (;;) {
        const wasEnded = ended; // read before the file: output written before the end is all in it
        // The handler owns its directory and could put a link (or a FIFO) where the log was: never followed, never waited on.
        handle ??= await fs
          .open(deps.file, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK)
          .then(async (h) => ((await h.stat()).isFile() ? h : (await h.close(), null)))
          .catch(() => null);
        const size = handle ? (await handle.stat()).size : 0;
        if (size > acked) {
          const want = Math.min(size - acked, MAX_CHUNK_BYTES);
          const buf = Buffer.alloc(want);
          const { bytesRead } = await handle!.read(buf, 0, want, acked);
          const last = wasEnded && acked + bytesRead === size;
          const n = last ? bytesRead : completeUtf8Length(buf.subarray(0, bytesRead));
          if (n > 0) {
            // The server refuses NUL in any input (PostgreSQL text cannot hold it): it travels as ␀.
            const chunk = {
              id: deps.id,
              offset: acked,
              bytes: n,
              text: decoder.decode(buf.subarray(0, n)).replaceAll('\u0000', NUL_REPLACEMENT),
            };
            const answer = await deps.send('appendWorkRequestLog', { id: deps.id, offset: acked, bytes: n }, () =>
              deps.api.appendWorkRequestLog(chunk),
            );
            if (!answer.ok) return deps.onRefused(answer.error);
            // Accepted or not, the server says where it stands: a repeat moves on, a misplaced chunk goes back.
            if (answer.value.nextOffset > size)
              return deps.onRefused({
                type: 'Mismatch',
                code: 'INVALID_STATE',
                message: `the server has ${answer.value.nextOffset} bytes of a ${size}-byte output`,
              });
            if (!answer.value.accepted && answer.value.nextOffset === chunk.offset) {
              return deps.onRefused({
                type: 'Mismatch',
                code: 'INVALID_STATE',
                message: `the server refused the chunk at ${chunk.offset} without moving on`,
              });
            }
            acked = answer.value.nextOffset;
            if (!answer.value.accepted || size - acked >= MAX_CHUNK_BYTES) continue; // resend from there, or a backlog: at once
          }
        }
        if (wasEnded && acked >= size) return;
        if (!ended) await pause(deps.intervalMs);
      }
    } finally {
      await handle?.close().catch(() => undefined);
    }
  }

  const done = run();
  done.catch(() => undefined); // the caller of finish() gets the failure; until then it is not unhandled
  return {
    finish() {
      ended = true;
      wake();
      return done;
    },
  };
}
