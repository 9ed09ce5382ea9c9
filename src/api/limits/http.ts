import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** Why a request body is refused before a byte of it is read: its status and a sentence naming the limit. */
export interface BodyRefusal {
  readonly status: 411 | 413;
  readonly message: string;
}

/**
 * A request body over `maxBytes` (413) or of unknown length (411: a chunked body could only be
 * measured by reading it), or null when it may be read. Node reads exactly Content-Length bytes as the
 * body, so the declared length bounds what is read. `setting`, when given, names the limit in the message.
 */
export function bodyRefusal(req: IncomingMessage, maxBytes: number, setting?: string): BodyRefusal | null {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return null;
  const declared = req.headers['content-length'];
  if (declared === undefined) {
    if (req.headers['transfer-encoding'] === undefined) return null; // no body at all
    return { status: 411, message: 'a request body needs a Content-Length header' };
  }
  if (Number(declared) > maxBytes)
    return {
      status: 413,
      message: `the request body of ${declared} bytes is over the limit of ${maxBytes}${setting ? ` (${setting})` : ''}`,
    };
  return null;
}

/** How much of a refused body is still read (and dropped) before the connection closes, and for how long. */
const DRAIN = { bytes: 16 * 1024 * 1024, ms: 10_000 } as const;

/**
 * Answers a request whose body is refused and closes the connection, without a reset: the answer is
 * written at once, and the connection ends once the client has sent the rest of its body (read and
 * dropped: at most DRAIN.bytes, for at most DRAIN.ms; past either it is closed as it is). Closing
 * while the client still sends would make its system answer with a reset, which most clients report
 * instead of the answer.
 */
export function answerAndClose(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders,
  body: string,
): void {
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body), connection: 'close' });
  res.write(body);
  let drained = 0;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    req.off('data', count);
    res.end();
    if (!req.readableEnded) req.socket.destroy(); // the client is still sending past the bound
  };
  const count = (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > DRAIN.bytes) end();
  };
  const timer = setTimeout(end, DRAIN.ms);
  timer.unref();
  if (req.readableEnded) return end();
  req.on('data', count);
  req.once('end', end);
  req.once('error', end);
  req.once('close', end);
  req.resume();
}

/**
 * Refuses a GraphQL request's body over `maxBytes` or of unknown length (bodyRefusal) with a GraphQL
 * error (`extensions.code` LIMIT_EXCEEDED, `extensions.limit` TAGSCHED_MAX_BODY_BYTES), before yoga
 * reads it, closing the connection as answerAndClose does. Returns true when it answered.
 */
export function refuseLargeBody(req: IncomingMessage, res: ServerResponse, maxBytes: number): boolean {
  const refusal = bodyRefusal(req, maxBytes, 'TAGSCHED_MAX_BODY_BYTES');
  if (!refusal) return false;
  const body = JSON.stringify({
    errors: [{ message: refusal.message, extensions: { code: 'LIMIT_EXCEEDED', limit: 'TAGSCHED_MAX_BODY_BYTES' } }],
  });
  answerAndClose(req, res, refusal.status, { 'content-type': 'application/json' }, body);
  return true;
}
