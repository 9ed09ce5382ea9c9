/**
 * A stand-in for the Hetzner Cloud API (https://docs.hetzner.cloud/), not the real cloud: the
 * documented subset the `hetzner` provider uses, answered the way the documentation says.
 *   POST   /v1/servers                  201 {server, action, next_actions, root_password}
 *   DELETE /v1/servers/{id}             200 {action}; 404 not_found
 *   GET    /v1/servers?label_selector=&name=&page=&per_page=   200 {servers, meta: {pagination}}
 *   GET    /v1/servers/{id}             200 {server} (with public_net.ipv4.ip and rescue_enabled)
 *   POST   /v1/servers/{id}/actions/enable_rescue  {type, ssh_keys}  201 {root_password, action}
 *   POST   /v1/servers/{id}/actions/poweron | poweroff | reset       201 {action}
 *   POST   /v1/servers/{id}/actions/create_image  {type, description, labels}  201 {image, action}
 *   GET    /v1/actions/{id}             200 {action}: running for `actionPolls` reads, then success (or
 *                                       error, for a command named in `failActions`)
 *   POST   /v1/ssh_keys {name, public_key, labels}  201 {ssh_key};  DELETE /v1/ssh_keys/{id} 204
 *   GET    /v1/images/{id} 200 {image};  DELETE /v1/images/{id} 204
 * A server powered on (or reset) after enable_rescue boots the rescue system: hetzner-rescue.ts lets
 * root in over SSH with the keys given to enable_rescue, on the port `rescuePort` (not 22: a test's
 * ephemeral port), to write the server's disk; create_image copies that disk into the snapshot.
 * Every request needs `Authorization: Bearer <a known token>` (401 unauthorized otherwise). Errors
 * are `{"error": {"code", "message", "details"}}` with the documented status. Tests can make it fail
 * (`failNext`), hang (`hang`), answer garbage (`garbageNext`) or run out of quota (`maxServers`).
 */
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { startRescueStandIn, type RescueStandIn } from './hetzner-rescue.js';
import { serve } from './http.js';

export interface StandInServer {
  id: number;
  name: string;
  status: string;
  created: string;
  labels: Record<string, string>;
  /** As the API shows it: its name and, for the types `prices` has, its price per location (strings of decimals, as the API writes them). */
  server_type: {
    name: string;
    prices?: {
      location: string;
      price_hourly: { net: string; gross: string };
      price_monthly: { net: string; gross: string };
    }[];
  };
  image: { name: string };
  datacenter: { location: { name: string } };
  user_data: string;
  public_net: { ipv4: { ip: string } };
  rescue_enabled: boolean;
  /** The ssh keys (ids) enable_rescue gave; root logs in with them while the server runs the rescue system. */
  rescueKeyIds: number[];
  /** Whether the server booted the rescue system (powered on after enable_rescue). */
  inRescue: boolean;
  /** Its disk, as the rescue system wrote it. */
  disk: Buffer;
}

export interface StandInSshKey {
  id: number;
  name: string;
  public_key: string;
  fingerprint: string;
  labels: Record<string, string>;
  created: string;
}

export interface StandInImage {
  id: number;
  type: 'snapshot';
  status: 'creating' | 'available';
  description: string;
  labels: Record<string, string>;
  created_from: { id: number; name: string };
  /** The server's disk when the image was made. */
  disk: Buffer;
}

export interface StandInAction {
  id: number;
  command: string;
  status: 'running' | 'success' | 'error';
  progress: number;
  started: string;
  finished: string | null;
  resources: { id: number; type: string }[];
  error: { code: string; message: string } | null;
  /** Reads left before it finishes. */
  polls: number;
  fails: boolean;
}

export interface HetznerStandIn {
  /** The API base URL, `…/v1`, for `TAGSCHED_HETZNER_API_URL`. */
  readonly url: string;
  readonly servers: Map<number, StandInServer>;
  readonly sshKeys: Map<number, StandInSshKey>;
  readonly images: Map<number, StandInImage>;
  readonly actions: Map<number, StandInAction>;
  /** The SSH port of the servers' rescue system (hetzner-rescue.ts). */
  readonly rescuePort: number;
  readonly rescue: RescueStandIn;
  /** Reads of GET /actions/{id} that still show a new action running. */
  actionPolls: number;
  /** Commands (create_image, poweron, …) whose next actions end in error, each as many times as given. */
  readonly failActions: Map<string, number>;
  /** Every request, in order (method, path with query, JSON body), for assertions. */
  readonly requests: { method: string; path: string; body: unknown; authorization: string | undefined }[];
  /** The project's server limit (resource_limit_exceeded past it). */
  maxServers: number;
  /**
   * Server types out of stock, as `type@location` (`cx22@fsn1`; `cx22@*` everywhere): creating one
   * there answers resource_unavailable, as the API does when a location has no room for a type.
   */
  readonly unavailable: Set<string>;
  /**
   * Hourly prices (gross, with VAT, a decimal string as the API writes it) of server types by
   * `type@location`: a created server's `server_type.prices` lists its type's, one entry per location,
   * as the documented Server object does. A type without any has an empty list.
   */
  readonly prices: Map<string, string>;
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
  locked: 423,
};

const LABEL_VALUE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$/;
const HOSTNAME =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
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

export async function startHetznerStandIn(options: {
  tokens: readonly string[];
  maxServers?: number;
}): Promise<HetznerStandIn> {
  const servers = new Map<number, StandInServer>();
  const sshKeys = new Map<number, StandInSshKey>();
  const images = new Map<number, StandInImage>();
  const actions = new Map<number, StandInAction>();
  const rescue = await startRescueStandIn(function* () {
    for (const s of servers.values()) {
      const target = {
        rescueKeys: () =>
          s.inRescue ? s.rescueKeyIds.map((id) => sshKeys.get(id)?.public_key ?? '').filter(Boolean) : [],
        get disk() {
          return s.disk;
        },
        set disk(d: Buffer) {
          s.disk = d;
        },
      };
      yield [s.id, target] as [number, typeof target];
    }
  });
  const requests: HetznerStandIn['requests'] = [];
  let nextId = 4_711_000;
  let nextAction = 13_000_000;
  let nextKey = 880_000;
  let nextImage = 990_000;
  /** What a finished action did to its server. */
  const finishAction = (a: StandInAction) => {
    const target = servers.get(a.resources[0]!.id);
    const image = a.resources[1] ? images.get(a.resources[1].id) : undefined;
    if (image) image.status = 'available';
    if (!target) return;
    if (a.command === 'start_server' || a.command === 'reset_server') {
      target.status = 'running';
      target.inRescue = target.rescue_enabled;
      // The rescue system is used for one boot only.
      target.rescue_enabled = false;
    }
    if (a.command === 'stop_server') {
      target.status = 'off';
      target.inRescue = false;
    }
    if (a.command === 'create_server' && target.status === 'initializing') target.status = 'off';
  };
  const injected: (
    | { kind: 'error'; status: number; code: string; message: string }
    | { kind: 'garbage'; body: string; contentType: string }
  )[] = [];

  const send = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const error = (res: http.ServerResponse, code: string, message: string, details: unknown = {}) =>
    send(res, STATUS_OF[code] ?? 400, { error: { code, message, details } });
  const action = (command: string, id: number, type = 'server') => {
    const left = standIn.failActions.get(command) ?? 0;
    if (left > 0) standIn.failActions.set(command, left - 1);
    const a: StandInAction = {
      id: nextAction++,
      command,
      status: 'running',
      progress: 0,
      started: new Date().toISOString(),
      finished: null,
      resources: [{ id, type }],
      error: null,
      polls: standIn.actionPolls,
      fails: left > 0,
    };
    actions.set(a.id, a);
    return actionView(a);
  };
  const actionView = (a: StandInAction) => {
    const { polls: _p, fails: _f, ...rest } = a;
    return rest;
  };
  // A server type's prices as the API lists them: net is gross without 19 % VAT.
  const pricesOf = (type: string) =>
    [...standIn.prices]
      .filter(([key]) => key.startsWith(`${type}@`))
      .map(([key, gross]) => {
        const net = (Number(gross) / 1.19).toFixed(10);
        return {
          location: key.slice(type.length + 1),
          price_hourly: { net, gross },
          price_monthly: { net: (Number(net) * 730).toFixed(10), gross: (Number(gross) * 730).toFixed(10) },
        };
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
      public_net: { ipv4: { ip: '127.0.0.1' } },
      rescue_enabled: false,
      rescueKeyIds: [],
      inRescue: false,
      disk: Buffer.alloc(0),
      ...fields,
    };
    servers.set(server.id, server);
    return server;
  };

  const standIn = {
    servers,
    sshKeys,
    images,
    actions,
    rescue,
    rescuePort: rescue.port,
    actionPolls: 0,
    failActions: new Map<string, number>(),
    requests,
    maxServers: options.maxServers ?? 1000,
    unavailable: new Set<string>(),
    prices: new Map<string, string>(),
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
    requests.push({
      method: req.method ?? '',
      path: url.pathname + url.search,
      body: text ? safeJson(text) : undefined,
      authorization: req.headers.authorization,
    });
    if (standIn.hang) return; // no answer; the client's deadline must cut it
    const auth = req.headers.authorization ?? '';
    if (!auth.startsWith('Bearer ') || !options.tokens.includes(auth.slice(7)))
      return error(res, 'unauthorized', 'unable to authenticate');
    const fault = injected.shift();
    if (fault?.kind === 'error')
      return send(res, fault.status, { error: { code: fault.code, message: fault.message, details: {} } });
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
      const all = [...servers.values()].filter(
        (s) => (!selector || matchesSelector(s.labels, selector)) && (!name || s.name === name),
      );
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
        typeof b.name !== 'string' || !HOSTNAME.test(b.name)
          ? { name: 'name', messages: ['must be a valid hostname'] }
          : null,
        typeof b.server_type !== 'string' || !b.server_type
          ? { name: 'server_type', messages: ['Missing data for required field.'] }
          : null,
        typeof b.image !== 'string' || !b.image
          ? { name: 'image', messages: ['Missing data for required field.'] }
          : null,
        typeof b.user_data === 'string' && b.user_data.length > USER_DATA_MAX
          ? { name: 'user_data', messages: ['too long'] }
          : null,
        b.labels !== undefined && !validLabels(b.labels) ? { name: 'labels', messages: ['invalid label'] } : null,
      ].filter(Boolean);
      if (invalid.length) return error(res, 'invalid_input', 'invalid input in fields', { fields: invalid });
      if ([...servers.values()].some((s) => s.name === b.name)) {
        return error(res, 'uniqueness_error', 'server name is already used', { fields: [{ name: 'name' }] });
      }
      if (servers.size >= standIn.maxServers)
        return error(res, 'resource_limit_exceeded', 'server limit exceeded', { limits: [{ name: 'server_limit' }] });
      const where = typeof b.location === 'string' ? b.location : 'fsn1';
      if (
        standIn.unavailable.has(`${b.server_type as string}@${where}`) ||
        standIn.unavailable.has(`${b.server_type as string}@*`)
      ) {
        return error(
          res,
          'resource_unavailable',
          `server type ${b.server_type as string} is unavailable in location ${where}`,
        );
      }
      const created = make({
        name: b.name as string,
        labels: (b.labels as Record<string, string>) ?? {},
        server_type: { name: b.server_type as string, prices: pricesOf(b.server_type as string) },
        image: { name: b.image as string },
        datacenter: { location: { name: typeof b.location === 'string' ? b.location : 'fsn1' } },
        user_data: typeof b.user_data === 'string' ? b.user_data : '',
      });
      const next = b.start_after_create === false ? [] : [action('start_server', created.id)];
      return send(res, 201, {
        server: view(created),
        action: action('create_server', created.id),
        next_actions: next,
        root_password: null,
      });
    }
    const parse = (): Record<string, unknown> | null => {
      try {
        const b = JSON.parse(text || '{}') as unknown;
        return b && typeof b === 'object' && !Array.isArray(b) ? (b as Record<string, unknown>) : null;
      } catch {
        return null;
      }
    };
    if (idMatch && req.method === 'GET') {
      const found = servers.get(Number(idMatch[1]));
      if (!found) return error(res, 'not_found', `server with ID '${idMatch[1]}' not found`);
      return send(res, 200, { server: view(found) });
    }
    const actionMatch = url.pathname.match(/^\/v1\/actions\/(\d+)$/);
    if (actionMatch && req.method === 'GET') {
      const a = actions.get(Number(actionMatch[1]));
      if (!a) return error(res, 'not_found', `action with ID '${actionMatch[1]}' not found`);
      if (a.status === 'running') {
        if (a.polls > 0) {
          a.polls--;
          a.progress = 50;
        } else {
          a.status = a.fails ? 'error' : 'success';
          a.progress = 100;
          a.finished = new Date().toISOString();
          if (a.fails) a.error = { code: 'action_failed', message: `${a.command} failed` };
          else finishAction(a);
        }
      }
      return send(res, 200, { action: actionView(a) });
    }
    const serverAction = url.pathname.match(/^\/v1\/servers\/(\d+)\/actions\/([a-z_]+)$/);
    if (serverAction && req.method === 'POST') {
      const target = servers.get(Number(serverAction[1]));
      if (!target) return error(res, 'not_found', `server with ID '${serverAction[1]}' not found`);
      const b = parse();
      if (!b) return error(res, 'json_error', 'invalid JSON in request body');
      switch (serverAction[2]) {
        case 'enable_rescue': {
          const keys = b.ssh_keys ?? [];
          if (!Array.isArray(keys) || !keys.every((k) => sshKeys.has(Number(k))))
            return error(res, 'invalid_input', 'invalid input in field ssh_keys', { fields: [{ name: 'ssh_keys' }] });
          if (b.type !== undefined && b.type !== 'linux64')
            return error(res, 'invalid_input', 'invalid rescue type', { fields: [{ name: 'type' }] });
          target.rescue_enabled = true;
          target.rescueKeyIds = keys.map(Number);
          return send(res, 201, { root_password: null, action: action('enable_rescue', target.id) });
        }
        case 'poweron':
        case 'reset':
          return send(res, 201, {
            action: action(serverAction[2] === 'poweron' ? 'start_server' : 'reset_server', target.id),
          });
        case 'poweroff':
          return send(res, 201, { action: action('stop_server', target.id) });
        case 'create_image': {
          if (b.type !== undefined && b.type !== 'snapshot' && b.type !== 'backup')
            return error(res, 'invalid_input', 'invalid image type', { fields: [{ name: 'type' }] });
          if (b.labels !== undefined && !validLabels(b.labels))
            return error(res, 'invalid_input', 'invalid input in field labels', {
              fields: [{ name: 'labels', messages: ['invalid label'] }],
            });
          const image: StandInImage = {
            id: nextImage++,
            type: 'snapshot',
            status: 'creating',
            description: typeof b.description === 'string' ? b.description : '',
            labels: (b.labels as Record<string, string>) ?? {},
            created_from: { id: target.id, name: target.name },
            disk: Buffer.from(target.disk),
          };
          images.set(image.id, image);
          const a = action('create_image', target.id);
          actions.get(a.id)!.resources.push({ id: image.id, type: 'image' });
          return send(res, 201, {
            image: imageView(image),
            action: actions.get(a.id) ? actionView(actions.get(a.id)!) : a,
          });
        }
        default:
          return error(res, 'not_found', `server action ${serverAction[2]} is not part of this stand-in`);
      }
    }
    if (url.pathname === '/v1/ssh_keys' && req.method === 'POST') {
      const b = parse();
      if (!b) return error(res, 'json_error', 'invalid JSON in request body');
      if (typeof b.name !== 'string' || !b.name)
        return error(res, 'invalid_input', 'invalid input in field name', { fields: [{ name: 'name' }] });
      if (typeof b.public_key !== 'string' || !/^ssh-(ed25519|rsa) [A-Za-z0-9+/=]+( .*)?$/.test(b.public_key)) {
        return error(res, 'invalid_input', 'invalid input in field public_key', { fields: [{ name: 'public_key' }] });
      }
      if ([...sshKeys.values()].some((k) => k.name === b.name))
        return error(res, 'uniqueness_error', 'SSH key with the same name already exists', {
          fields: [{ name: 'name' }],
        });
      if ([...sshKeys.values()].some((k) => k.public_key === b.public_key))
        return error(res, 'uniqueness_error', 'SSH key with the same fingerprint already exists', {
          fields: [{ name: 'public_key' }],
        });
      const key: StandInSshKey = {
        id: nextKey++,
        name: b.name,
        public_key: b.public_key,
        fingerprint: randomBytes(16)
          .toString('hex')
          .replace(/(..)(?!$)/g, '$1:'),
        labels: (b.labels as Record<string, string>) ?? {},
        created: new Date().toISOString(),
      };
      sshKeys.set(key.id, key);
      return send(res, 201, { ssh_key: key });
    }
    const keyMatch = url.pathname.match(/^\/v1\/ssh_keys\/(\d+)$/);
    if (keyMatch && req.method === 'DELETE') {
      if (!sshKeys.delete(Number(keyMatch[1])))
        return error(res, 'not_found', `SSH key with ID '${keyMatch[1]}' not found`);
      res.writeHead(204);
      return void res.end();
    }
    const imageMatch = url.pathname.match(/^\/v1\/images\/(\d+)$/);
    if (imageMatch && req.method === 'GET') {
      const image = images.get(Number(imageMatch[1]));
      if (!image) return error(res, 'not_found', `image with ID '${imageMatch[1]}' not found`);
      return send(res, 200, { image: imageView(image) });
    }
    if (imageMatch && req.method === 'DELETE') {
      if (!images.delete(Number(imageMatch[1])))
        return error(res, 'not_found', `image with ID '${imageMatch[1]}' not found`);
      res.writeHead(204);
      return void res.end();
    }
    if (idMatch && req.method === 'DELETE') {
      const id = Number(idMatch[1]);
      if (!servers.delete(id)) return error(res, 'not_found', `server with ID '${id}' not found`);
      return send(res, 200, { action: action('delete_server', id) });
    }
    return error(res, 'not_found', `${req.method} ${url.pathname} is not part of this stand-in`);
  });

  const close = async () => {
    await rescue.close();
    await server.close();
  };
  return Object.assign(standIn, { url: `${server.url}/v1`, close }) as HetznerStandIn;
}

/** A server as the API shows it (user data is write-only there; the rest is the stand-in's own). */
function view(s: StandInServer) {
  const { user_data: _ignored, rescueKeyIds: _keys, inRescue: _rescue, disk: _disk, ...rest } = s;
  return rest;
}

/** An image as the API shows it. */
function imageView(i: StandInImage) {
  const { disk, ...rest } = i;
  return {
    ...rest,
    image_size: disk.length / 2 ** 30,
    disk_size: Math.ceil(disk.length / 2 ** 30),
    os_flavor: 'debian',
    rapid_deploy: false,
    protection: { delete: false },
  };
}

function validLabels(labels: unknown): boolean {
  if (!labels || typeof labels !== 'object' || Array.isArray(labels)) return false;
  return Object.entries(labels).every(
    ([k, v]) =>
      /^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$/.test(k) && typeof v === 'string' && LABEL_VALUE.test(v),
  );
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
