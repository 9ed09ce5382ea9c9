/**
 * A stand-in for the EC2 instance metadata service (IMDSv2), as far as a spot interruption notice goes,
 * following AWS's documentation: `PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds`
 * (1 to 21600) answers a session token; `GET /latest/meta-data/spot/instance-action` with
 * `X-aws-ec2-metadata-token` answers 404 while no interruption is scheduled and, once one is,
 * `{"action": "terminate", "time": "…Z"}`; a request without a valid token gets 401. Plain HTTP on an
 * ephemeral port of 127.0.0.1 (the real one is 169.254.169.254).
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MetadataStandIn {
  readonly url: string;
  /** Requests seen, `METHOD path`, in order. */
  readonly requests: string[];
  /** Schedules the interruption: from now on the notice is answered. */
  interrupt(notice: { action: string; time: string }): void;
  close(): Promise<void>;
}

export async function startMetadataStandIn(): Promise<MetadataStandIn> {
  const tokens = new Map<string, number>(); // token → valid until (ms)
  const requests: string[] = [];
  let notice: { action: string; time: string } | null = null;
  const server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const send = (status: number, body: string, type = 'text/plain') => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    };
    if (req.method === 'PUT' && req.url === '/latest/api/token') {
      const ttl = Number(req.headers['x-aws-ec2-metadata-token-ttl-seconds']);
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21600) return send(400, 'Bad Request');
      const token = randomBytes(24).toString('base64url');
      tokens.set(token, Date.now() + ttl * 1000);
      return send(200, token);
    }
    if (req.method === 'GET' && req.url?.startsWith('/latest/meta-data/')) {
      const token = String(req.headers['x-aws-ec2-metadata-token'] ?? '');
      if (!((tokens.get(token) ?? 0) > Date.now())) return send(401, 'Unauthorized');
      if (req.url === '/latest/meta-data/spot/instance-action')
        return notice ? send(200, JSON.stringify(notice), 'application/json') : send(404, 'Not Found');
      return send(404, 'Not Found');
    }
    send(405, 'Method Not Allowed');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    interrupt(n) {
      notice = n;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
