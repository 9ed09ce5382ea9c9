import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * Refuses, before a byte of it is read, a request body over `maxBytes` (413) or of unknown length
 * (411: a chunked body could only be measured by reading it). Node reads exactly Content-Length bytes
 * as the body, so the declared length bounds what yoga will read. Returns true when it answered.
 */
export function refuseLargeBody(req: IncomingMessage, res: ServerResponse, maxBytes: number): boolean {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return false;
  const declared = req.headers['content-length'];
  let status = 0;
  let message = '';
  if (declared === undefined) {
    if (req.headers['transfer-encoding'] === undefined) return false; // no body at all
    status = 411;
    message = 'a request body needs a Content-Length header';
  } else if (Number(declared) > maxBytes) {
    status = 413;
    message = `the request body of ${declared} bytes is over the limit of ${maxBytes} (TAGSCHED_MAX_BODY_BYTES)`;
  }
  if (!status) return false;
  const body = JSON.stringify({ errors: [{ message, extensions: { code: 'LIMIT_EXCEEDED', limit: 'TAGSCHED_MAX_BODY_BYTES' } }] });
  res.writeHead(status, { 'content-type': 'application/json', connection: 'close' }).end(body);
  req.resume(); // drain what the client still sends, without keeping it
  return true;
}
