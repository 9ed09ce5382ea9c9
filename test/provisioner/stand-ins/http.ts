import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A small real HTTP server on an ephemeral port of 127.0.0.1. */
export interface StandInServer {
  readonly url: string;
  /** Answers nothing more; requests held open (a `hang`) are cut. */
  close(): Promise<void>;
}

/** Starts `handle` on an ephemeral port; held requests are closed with the server. */
export async function serve(
  handle: (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => void | Promise<void>,
): Promise<StandInServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      Promise.resolve(handle(req, Buffer.concat(chunks), res)).catch((err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(String(err));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
