/**
 * The agent's two ways to the server: the assignments subscription over graphql-ws, which reconnects
 * and resubscribes by itself, and mutations over HTTP (fetch; they survive a WebSocket cut). The
 * acknowledgement and the report of an assignment go over the open connection when there is one
 * (no new HTTP request, no token lookup: api/ws/connection-identity.ts on the server), and over HTTP
 * when there is none (preferConnection); one cut with its connection fails as transient, and the
 * agent's retry sends it on whichever way is open then. Failures are sorted into three kinds, because
 * each calls for something different.
 */
import { CloseCode, createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { postGraphql } from '../shared/graphql-post.js';
import { backoffDelay } from './backoff.js';
import type { Logger } from './log.js';
import { MESSAGES } from './log.js';
import { assignmentSchema, DOCUMENTS, type Assignment, type Request } from './operations.js';

/** The server refused the token (HTTP 401, WebSocket 4401/4403, UNAUTHENTICATED): stop, exit 2. */
export class AuthError extends Error {
  override readonly name = 'AuthError';
}

/** The server could not be reached or could not answer now: try again later. */
export class TransientError extends Error {
  override readonly name = 'TransientError';
}

/** The server does not understand the request (a schema mismatch): trying again will not help. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
}

interface GraphqlBody {
  data?: Record<string, unknown> | null;
  errors?: { message?: string; extensions?: { code?: string } }[];
}

const AUTH_CODES = new Set(['UNAUTHENTICATED', 'FORBIDDEN']);

/**
 * The error a GraphQL-over-HTTP answer stands for, or null when `data` can be used. 5xx, 408 and
 * 429 are transient, and so is a masked server error (INTERNAL_SERVER_ERROR: the database may be
 * restarting); any other GraphQL error means the request itself is wrong.
 */
export function errorOfResponse(status: number, body: unknown): Error | null {
  const errors = (body as GraphqlBody | null)?.errors ?? [];
  const summary = errors
    .map((e) => e.message ?? '')
    .join('; ')
    .slice(0, 500);
  const codes = errors.map((e) => e.extensions?.code);
  if (status === 401 || status === 403 || codes.some((c) => c !== undefined && AUTH_CODES.has(c))) {
    return new AuthError(summary || `HTTP ${status}`);
  }
  if (status >= 500 || status === 408 || status === 429)
    return new TransientError(`HTTP ${status}${summary ? `: ${summary}` : ''}`);
  if (codes.includes('INTERNAL_SERVER_ERROR')) return new TransientError(`server error: ${summary}`);
  if (errors.length) return new ProtocolError(summary);
  if (status < 200 || status >= 300) return new ProtocolError(`HTTP ${status}`);
  const data = (body as GraphqlBody | null)?.data;
  if (!data || typeof data !== 'object') return new ProtocolError('the answer has no data');
  return null;
}

/** Mutations over HTTP with a bearer token, each bounded by `timeoutMs`. */
export function createHttpRequest(options: {
  url: string;
  token: string;
  timeoutMs: number;
  fetch?: typeof fetch;
}): Request {
  const doFetch = options.fetch ?? fetch;
  return async (query, variables) => {
    let answer: { status: number; body: unknown };
    try {
      answer = await postGraphql({
        url: options.url,
        token: options.token,
        query,
        variables,
        timeoutMs: options.timeoutMs,
        fetch: doFetch,
      });
    } catch (err) {
      // fetch rejects on refused connections, resets, DNS failures and the timeout alike.
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new TransientError(cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err)));
    }
    const { status, body } = answer;
    const error = errorOfResponse(status, body);
    if (error) throw error;
    return (body as GraphqlBody).data as Record<string, unknown>;
  };
}

/**
 * The connection runs as many operations at once as the server allows already
 * (TAGSCHED_MAX_SUBSCRIPTIONS_PER_CONNECTION): this one was not run, and may be sent over HTTP at once.
 */
export class ConnectionBusyError extends TransientError {}

/**
 * A Request that sends `documents` over the stream's open connection (AssignmentStream.request) and
 * everything else over `http`; so does a document when no connection is open, when the connection has
 * MAX_CONNECTION_REQUESTS of them in flight already, or when the server refuses one for its limit of
 * operations per connection (ConnectionBusyError).
 */
export function preferConnection(
  http: Request,
  stream: () => AssignmentStream | null,
  documents: ReadonlySet<string>,
): Request {
  return async (query, variables) => {
    const overConnection = documents.has(query) ? stream()?.request?.(query, variables) : null;
    if (!overConnection) return http(query, variables);
    try {
      return await overConnection;
    } catch (err) {
      if (err instanceof ConnectionBusyError) return http(query, variables);
      throw err;
    }
  };
}

/**
 * Operations the agent keeps in flight on its connection at most (the server's own limit is 50 by
 * default, the assignments subscription among them): a worker of high concurrency that reports many
 * results at once, after a reconnection say, sends the rest over HTTP.
 */
export const MAX_CONNECTION_REQUESTS = 16;

/** The token refusal a subscription error stands for, or null for anything worth retrying. */
export function authFailureOf(err: unknown): AuthError | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === CloseCode.Unauthorized || code === CloseCode.Forbidden) {
    const reason = (err as { reason?: unknown }).reason;
    return new AuthError(`WebSocket closed with ${code}${reason ? `: ${String(reason)}` : ''}`);
  }
  if (Array.isArray(err)) {
    const refused = (err as NonNullable<GraphqlBody['errors']>).find((e) => AUTH_CODES.has(e?.extensions?.code ?? ''));
    if (refused) return new AuthError(refused.message ?? 'subscription refused');
  }
  return null;
}

/**
 * Disposes a client without waiting on, or failing with, a connection attempt in progress
 * (graphql-ws awaits it, and rethrows its error).
 */
function disposeQuietly(c: Client, waitMs = 1000): Promise<void> {
  const disposed = Promise.resolve()
    .then(() => c.dispose())
    .catch(() => {});
  return Promise.race([disposed, new Promise<void>((resolve) => setTimeout(resolve, waitMs).unref())]);
}

function describe(err: unknown): string {
  if (Array.isArray(err)) return err.map((e: { message?: string }) => e.message).join('; ');
  const e = err as { code?: unknown; reason?: unknown; message?: unknown } | null;
  if (e && e.code !== undefined) return `${String(e.code)} ${String(e.reason ?? e.message ?? '')}`.trim();
  return err instanceof Error ? err.message : String(err);
}

/** What the assignments stream reports to the agent. */
export interface AssignmentStreamOptions {
  wsUrl: string;
  token: string;
  maxBackoffMs: number;
  keepAliveMs: number;
  handshakeTimeoutMs: number;
  /** How long an operation sent over the connection waits for its answer. */
  requestTimeoutMs: number;
  log: Logger;
  /** Every (re)connection: the subscription is (re)sent on it. */
  onConnected(reconnect: boolean): void;
  onAssignment(assignment: Assignment): void;
  /** The token was refused: the stream has stopped for good. */
  onFatal(error: AuthError): void;
}

/** A running subscription; close() ends it. */
export interface AssignmentStream {
  close(): Promise<void>;
  /**
   * Sends one operation over the subscription's connection, answered as createHttpRequest answers;
   * null when the connection is not open now (the caller sends it over HTTP instead).
   */
  request?(query: string, variables?: Record<string, unknown>): Promise<Record<string, unknown>> | null;
}

/**
 * Sends one query or mutation over an open graphql-ws client: its answer, or the error it stands for
 * (errorOfResponse). A connection cut before the answer fails the operation (TransientError) instead
 * of letting graphql-ws send it again on the next connection; so does no answer within `timeoutMs`.
 * `onCut` registers the function the caller's close handler calls, with the close event: a close that
 * refuses the token (4401, 4403) is an AuthError, as over HTTP. Callers use it through
 * connectionRequests, which keeps that registry.
 */
function requestOverConnection(
  c: Client,
  query: string,
  variables: Record<string, unknown> | undefined,
  timeoutMs: number,
  onCut: (cut: (event?: unknown) => void) => () => void,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let answer: GraphqlBody | null = null;
    let settled = false;
    const settle = (error: Error | null, data?: Record<string, unknown>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      forget();
      if (error) {
        unsubscribe();
        reject(error);
      } else resolve(data!);
    };
    const timer = setTimeout(
      () => settle(new TransientError(`no answer over the connection within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const forget = onCut((event) =>
      settle(authFailureOf(event) ?? new TransientError('the connection was cut before the answer')),
    );
    const unsubscribe = c.subscribe<Record<string, unknown>>(
      { query, variables },
      {
        next: (result) => {
          answer = result as GraphqlBody;
        },
        error: (err) => {
          const auth = authFailureOf(err);
          if (auth) return settle(auth);
          if (Array.isArray(err)) {
            const errors = err as NonNullable<GraphqlBody['errors']>;
            if (
              errors.some(
                (e) =>
                  e?.extensions?.code === 'LIMIT_EXCEEDED' &&
                  (e.extensions as { limit?: string }).limit === 'TAGSCHED_MAX_SUBSCRIPTIONS_PER_CONNECTION',
              )
            ) {
              return settle(new ConnectionBusyError(errors.map((e) => e.message).join('; ')));
            }
            return settle(errorOfResponse(200, { errors: err }) ?? new ProtocolError('the operation was refused'));
          }
          settle(new TransientError(describe(err)));
        },
        complete: () => {
          if (!answer) return settle(new TransientError('the operation ended without an answer'));
          const error = errorOfResponse(200, answer);
          settle(error, error ? undefined : (answer.data as Record<string, unknown>));
        },
      },
    );
  });
}

/** The operations one owner has in flight over its graphql-ws connection. */
export interface ConnectionRequests {
  /** How many are in flight. */
  readonly size: number;
  /** Sends one over `c`: its answer, or the error it stands for (requestOverConnection). */
  send(
    c: Client,
    query: string,
    variables: Record<string, unknown> | undefined,
    timeoutMs: number,
  ): Promise<Record<string, unknown>>;
  /**
   * Fails every one in flight as cut: the owner calls it when their connection closes, with the close
   * event (a refused token is then an AuthError), or with none when it drops the connection itself.
   */
  cutAll(event?: unknown): void;
}

/** A registry of the operations in flight over one owner's connection (the agent's stream, the benchmark's workers). */
export function connectionRequests(): ConnectionRequests {
  const cuts = new Set<(event?: unknown) => void>();
  return {
    get size() {
      return cuts.size;
    },
    send: (c, query, variables, timeoutMs) =>
      requestOverConnection(c, query, variables, timeoutMs, (cut) => {
        cuts.add(cut);
        return () => cuts.delete(cut);
      }),
    cutAll(event) {
      for (const cut of [...cuts]) cut(event);
    },
  };
}

/**
 * Subscribes to `assignments` and keeps the subscription alive: graphql-ws retries cut
 * connections (backoff with jitter, every failure but a refused token), a ping unanswered for
 * `keepAliveMs` counts as a cut (as does a 1013, try again later, from a server whose database did not
 * answer), and an error that graphql-ws gives up on (a 4500 internal error, a 4429, a completed
 * subscription) starts a new client after a backoff.
 */
export function openAssignmentStream(o: AssignmentStreamOptions): AssignmentStream {
  const { log } = o;
  // graphql-ws creates its sockets itself; a subclass is how ws gets its handshake timeout.
  class TimedWebSocket extends WebSocket {
    constructor(address: string, protocols?: string | string[]) {
      super(address, protocols, { handshakeTimeout: o.handshakeTimeoutMs });
    }
  }
  let closed = false;
  let everConnected = false;
  let restarts = 0;
  let client: Client | null = null;
  let open = false; // the current client's connection is acknowledged and not closed
  const inFlight = connectionRequests(); // operations over it, failed when it closes
  const cutAll = (event?: unknown) => {
    open = false;
    inFlight.cutAll(event);
  };
  let restartTimer: NodeJS.Timeout | undefined;
  // Why the last connection ended or the last attempt failed, for the reconnecting line: an operator
  // reading "reconnecting" wants to know whether the server is down, refusing, or gone quiet.
  let cause = '';

  const retryWait = async (retries: number) => {
    const delayMs = backoffDelay(retries, o.maxBackoffMs);
    log.info({ attempt: retries + 1, delayMs, cause: cause || undefined }, MESSAGES.reconnecting);
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  };

  function start() {
    let connected = false;
    let pongTimer: NodeJS.Timeout | undefined;
    let lastError = '';
    const c = createClient({
      url: o.wsUrl,
      webSocketImpl: TimedWebSocket,
      connectionParams: { authorization: `Bearer ${o.token}` },
      lazy: true,
      retryAttempts: Infinity,
      shouldRetry: (e) => authFailureOf(e) === null,
      retryWait,
      keepAlive: o.keepAliveMs,
      connectionAckWaitTimeout: o.handshakeTimeoutMs,
    });
    client = c;
    c.on('connected', () => {
      connected = true;
      open = client === c;
      restarts = 0;
      cause = '';
      log.info({ reconnect: everConnected }, MESSAGES.connected);
      log.info(MESSAGES.subscribed);
      o.onConnected(everConnected);
      everConnected = true;
    });
    c.on('ping', (received) => {
      if (received) return;
      clearTimeout(pongTimer);
      pongTimer = setTimeout(() => {
        log.warn({ waitedMs: o.keepAliveMs }, 'no answer to a ping: the connection counts as cut');
        cause = `no answer to a ping within ${o.keepAliveMs} ms`;
        c.terminate();
      }, o.keepAliveMs);
    });
    c.on('pong', (received) => {
      if (received) clearTimeout(pongTimer);
    });
    c.on('error', (err) => {
      lastError = describe((err as { error?: unknown }).error ?? err);
      cause = lastError;
    });
    c.on('closed', (event) => {
      clearTimeout(pongTimer);
      if (client === c) cutAll(event);
      if (closed) return;
      const { code, reason } = event as { code?: number; reason?: string };
      if (!cause.startsWith('no answer to a ping'))
        cause = reason
          ? `closed by the server (${code}: ${reason})`
          : lastError || `connection closed (${code ?? 'no code'})`;
      if (connected) log.warn({ code, reason: reason || lastError || undefined }, MESSAGES.disconnected);
      else log.debug({ code, error: lastError || reason || undefined }, 'connection attempt failed');
      connected = false;
    });
    c.subscribe<{ assignments: unknown }>(
      { query: DOCUMENTS.assignments },
      {
        next(result) {
          if (result.errors?.length) log.error({ errors: result.errors }, 'the assignments subscription sent errors');
          if (!result.data) return;
          const parsed = assignmentSchema.safeParse(result.data.assignments);
          if (parsed.success) o.onAssignment(parsed.data);
          else log.error({ error: parsed.error.message }, 'an assignment without the expected fields was ignored');
        },
        error(err) {
          if (closed) return;
          const auth = authFailureOf(err);
          if (auth) {
            closed = true;
            void disposeQuietly(c);
            o.onFatal(auth);
            return;
          }
          log.warn({ error: describe(err) }, 'the assignments subscription failed');
          cause = `the assignments subscription failed: ${describe(err)}`;
          restartLater(c);
        },
        complete() {
          if (closed) return;
          log.warn('the server ended the assignments subscription');
          cause = 'the server ended the assignments subscription';
          restartLater(c);
        },
      },
    );
  }

  function restartLater(c: Client) {
    if (client === c) cutAll();
    void disposeQuietly(c);
    const delayMs = backoffDelay(restarts, o.maxBackoffMs);
    restarts += 1;
    log.info({ attempt: restarts, delayMs, cause: cause || undefined }, MESSAGES.reconnecting);
    restartTimer = setTimeout(start, delayMs);
  }

  start();
  return {
    async close() {
      closed = true;
      clearTimeout(restartTimer);
      cutAll();
      if (client) await disposeQuietly(client);
    },
    request(query, variables) {
      if (closed || !open || !client || inFlight.size >= MAX_CONNECTION_REQUESTS) return null;
      return inFlight.send(client, query, variables, o.requestTimeoutMs);
    },
  };
}
