/**
 * A stand-in for the Hetzner Cloud API (https://docs.hetzner.cloud/), not the real cloud: the
 * documented subset the `hetzner` provider uses, answered the way the documentation says.
 *   POST   /v1/servers                  201 {server, action, next_actions, root_password}
 *   DELETE /v1/servers/{id}             200 {action}; 404 not_found
 *   GET    /v1/servers?label_selector=&name=&page=&per_page=   200 {servers, meta: {pagination}}
 * Every request needs `Authorization: Bearer <a known token>` (401 unauthorized otherwise). Errors
 * are `{"error": {"code", "message", "details"}}` with the documented status. Tests can make it fail
 * (`failNext`), hang (`hang`), answer garbage (`garbageNext`) or run out of quota (`maxServers`).
 */
import type http from 'node:http';
import { serve } from './http.js';

export interface StandInServer {
  id: number;
  name: string;
  status: string;
  created: string;
  labels: Record<string, string>;
  server_type: { name: string };
  image: { name: string };
  datacenter: { location: { name: string } };
  user_data: string;
}

export interface HetznerStandIn {
  /** The API base URL, `…/v1`, for `TAGSCHED_HETZNER_API_URL`. */
  readonly url: string;
  readonly servers: Map<number, StandInServer>;
  /** Every request, in order (method, path with query, JSON body), for assertions. */
  readonly requests: { method: string; path: string; body: unknown; authorization: string | undefined }[];
  /** The project's server limit (resource_limit_exceeded past it). */
  maxServers: number;
  /** When set, requests get no answer at all (until close). */
  hang: boolean;
  /** The next request fails with this error. */
  failNext(status: number, code: string, message: string): void;
  /** The next request gets a 200 with this body. */
  garbageNext(body: string, contentType?: string): void;
  /** Adds a server as if created earlier (for lists and pagination). */
  seed(server: Partial<StandInServer> & { name: string }): StandInServer;
  close(): Promise<void>;
}

// The documentation's status for each error code the stand-in answers.
const STATUS_OF: Record<string, number> = {
  unauthorized: 401,
  forbidden: 403,
  invalid_input: 400,
  json_error: 400,
  not_found: 404,
  uniqueness_error: 409,
  resource_limit_exceeded: 403,
  resource_unavailable: 403,
  rate_limit_exceeded: 429,
};

const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$/;
const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const USER_DATA_MAX = 32 * 1024;

/** `key==value`, `key=value`, `key!=value`, `key`, `!key`, joined with commas (AND). */
function matchesSelector(labels: Record<string, string>, selector: string): boolean {
  return selector.split(',').every((term) => {
    const t = term.trim();
    let m: RegExpMatchArray | null;
    if ((m = t.match(/^([^!=]+)!=(.*)$/))) return labels[m[1]!] !== m[2];
    if ((m = t.match(/^([^!=]+)==?(.*)$/))) return labels[m[1]!] === m[2];
    if (t.startsWith('!')) return !(t.slice(1) in labels);
    return t in labels;
  });
}

export async function startHetznerStandIn(options: { tokens: readonly string[]; maxServers?: number }): Promise<HetznerStandIn> {
  const servers = new Map<number, StandInServer>();
  const requests: HetznerStandIn['requests'] = [];
  let nextId = 4_711_000;
  let nextAction = 13_000_000;
  const injected: ({ kind: 'error'; status: number; code: string; message: string } | { kind: 'garbage'; body: string; contentType: string })[] = [];

  const send = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const error = (res: http.ServerResponse, code: string, message: string, details: unknown = {}) => send(res, STATUS_OF[code] ?? 400, { error: { code, message, details } });
  const action = (command: string, id: number) => ({
    id: nextAction++,
    command,
    status: 'running',
    progress: 0,
    started: new Date().toISOString(),
    finished: null,
    resources: [{ id, type: 'server' }],
    error: null,
  });
  const make = (fields: Partial<StandInServer> & { name: string }): StandInServer => {
    const server: StandInServer = {
      id: nextId++,
      status: 'initializing',
      created: new Date().toISOString(),
      labels: {},
      server_type: { name: 'cx22' },
      image: { name: 'debian-12' },
      datacenter: { location: { name: 'fsn1' } },
      user_data: '',
      ...fields,
    };
    servers.set(server.id, server);
    return server;
  };

  const standIn = {
    servers,
    requests,
    maxServers: options.maxServers ?? 1000,
    hang: false,
    failNext(status: number, code: string, message: string) {
      injected.push({ kind: 'error', status, code, message });
    },
    garbageNext(body: string, contentType = 'text/html') {
      injected.push({ kind: 'garbage', body, contentType });
    },
    seed: make,
  };

  const server = await serve((req, raw, res) => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    let body: unknown;
    const text = raw.toString('utf8');
    requests.push({ method: req.method ?? '', path: url.pathname + url.search, body: text ? safeJson(text) : undefined, authorization: req.headers.authorization });
    if (standIn.hang) return; // no answer; the client's deadline must cut it
    const auth = req.headers.authorization ?? '';
    if (!auth.startsWith('Bearer ') || !options.tokens.includes(auth.slice(7))) return error(res, 'unauthorized', 'unable to authenticate');
    const fault = injected.shift();
    if (fault?.kind === 'error') return send(res, fault.status, { error: { code: fault.code, message: fault.message, details: {} } });
    if (fault?.kind === 'garbage') {
      res.writeHead(200, { 'content-type': fault.contentType });
      return void res.end(fault.body);
    }

    const idMatch = url.pathname.match(/^\/v1\/servers\/(\d+)$/);
    if (url.pathname === '/v1/servers' && req.method === 'GET') {
      const selector = url.searchParams.get('label_selector');
      const name = url.searchParams.get('name');
      const perPage = Math.min(Math.max(Number(url.searchParams.get('per_page') ?? 25) || 25, 1), 50);
      const page = Math.max(Number(url.searchParams.get('page') ?? 1) || 1, 1);
      const all = [...servers.values()].filter((s) => (!selector || matchesSelector(s.labels, selector)) && (!name || s.name === name));
      const lastPage = Math.max(1, Math.ceil(all.length / perPage));
      return send(res, 200, {
        servers: all.slice((page - 1) * perPage, page * perPage).map(view),
        meta: {
          pagination: {
            page,
            per_page: perPage,
            previous_page: page > 1 ? page - 1 : null,
            next_page: page < lastPage ? page + 1 : null,
            last_page: lastPage,
            total_entries: all.length,
          },
        },
      });
    }
    if (url.pathname === '/v1/servers' && req.method === 'POST') {
      try {
        body = JSON.parse(text);
      } catch {
        return error(res, 'json_error', 'invalid JSON in request body');
      }
      const b = (body ?? {}) as Record<string, unknown>;
      const invalid = [
        typeof b.name !== 'string' || !HOSTNAME.test(b.name) ? { name: 'name', messages: ['must be a valid hostname'] } : null,
        typeof b.server_type !== 'string' || !b.server_type ? { name: 'server_type', messages: ['Missing data for required field.'] } : null,
        typeof b.image !== 'string' || !b.image ? { name: 'image', messages: ['Missing data for required field.'] } : null,
        typeof b.user_data === 'string' && b.user_data.length > USER_DATA_MAX ? { name: 'user_data', messages: ['too long'] } : null,
        b.labels !== undefined && !validLabels(b.labels) ? { name: 'labels', messages: ['invalid label'] } : null,
      ].filter(Boolean);
      if (invalid.length) return error(res, 'invalid_input', 'invalid input in fields', { fields: invalid });
      if ([...servers.values()].some((s) => s.name === b.name)) {
        return error(res, 'uniqueness_error', 'server name is already used', { fields: [{ name: 'name' }] });
      }
      if (servers.size >= standIn.maxServers) return error(res, 'resource_limit_exceeded', 'server limit exceeded', { limits: [{ name: 'server_limit' }] });
      const created = make({
        name: b.name as string,
        labels: (b.labels as Record<string, string>) ?? {},
        server_type: { name: b.server_type as string },
        image: { name: b.image as string },
        datacenter: { location: { name: typeof b.location === 'string' ? b.location : 'fsn1' } },
        user_data: typeof b.user_data === 'string' ? b.user_data : '',
      });
      return send(res, 201, { server: view(created), action: action('create_server', created.id), next_actions: [action('start_server', created.id)], root_password: null });
    }
    if (idMatch && req.method === 'DELETE') {
      const id = Number(idMatch[1]);
      if (!servers.delete(id)) return error(res, 'not_found', `server with ID '${id}' not found`);
      return send(res, 200, { action: action('delete_server', id) });
    }
    return error(res, 'not_found', `${req.method} ${url.pathname} is not part of this stand-in`);
  });

  return Object.assign(standIn, { url: `${server.url}/v1`, close: server.close }) as HetznerStandIn;
}

/** A server as the API shows it (user data is write-only there). */
function view(s: StandInServer): Omit<StandInServer, 'user_data'> {
  const { user_data: _ignored, ...rest } = s;
  return rest;
}

function validLabels(labels: unknown): boolean {
  if (!labels || typeof labels !== 'object' || Array.isArray(labels)) return false;
  return Object.entries(labels).every(([k, v]) => /^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$/.test(k) && typeof v === 'string' && LABEL_VALUE.test(v));
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
