/**
 * tagsched-admin's only way to the server: GraphQL over HTTP (queries and mutations) and over
 * WebSocket (graphql-ws, for following a log). Every failure becomes an AdminError with the exit
 * code of exit-codes.ts; a mutation's typed error (a result union member implementing Error)
 * becomes one too, with its message and, for an InputError, every problem. The token goes in the
 * Authorization header and is never part of a message.
 */
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { postGraphql } from '../../shared/graphql-post.js';
import { AdminError, EXIT, exitCodeOf } from './exit-codes.js';
import type { Connection } from './settings.js';

type Json = Record<string, any>;

interface GraphqlError {
  message?: string;
  extensions?: { code?: string; limit?: string };
}

/** The selection every mutation's result union gets: enough to report any typed error. */
export const ERROR_SELECTION =
  '__typename ... on Error { code message } ... on InputError { path problems { code message path } }';

/** A typed error of a result union, as selected by ERROR_SELECTION. */
interface TypedError {
  __typename: string;
  code: string;
  message: string;
  path?: string | null;
  problems?: { code: string; message: string; path: string | null }[];
}

/** The client every command gets. */
export interface Api {
  readonly connection: Connection;
  /** Runs a query; returns `data` or throws an AdminError. */
  query<T = Json>(document: string, variables?: Json): Promise<T>;
  /**
   * Runs a mutation whose field `field` is a result union selected with ERROR_SELECTION; returns
   * the whole `data` when it is not a typed error, throws an AdminError (carrying `data`) when it is.
   */
  mutate<T = Json>(document: string, variables: Json, field: string): Promise<T>;
  /** Runs a subscription until it completes, fails, or `signal` aborts it. */
  subscribe(document: string, variables: Json, onData: (data: Json) => void, signal: AbortSignal): Promise<void>;
}

/** The typed error of a mutation, with the GraphQL data kept for --json. */
export class TypedErrorResult extends AdminError {
  constructor(
    error: TypedError,
    readonly data: Json,
  ) {
    const problems = error.problems ?? [];
    const withPath = (message: string, path: string | null | undefined) =>
      path && !message.includes(path) ? `${path}: ${message}` : message;
    // Several problems: one line each, under a line that counts them.
    const many = problems.length > 1;
    const details = many ? problems.map((p) => `${withPath(p.message, p.path)} (${p.code})`) : [];
    super(
      many ? `the input was refused, ${problems.length} problems:` : withPath(error.message, error.path),
      exitCodeOf(error.code),
      error.code,
      details,
    );
  }
}

/** The hint for a refused or missing token: where the token came from, never what it is. */
function authHint(connection: Connection): string {
  return connection.token
    ? `the token came from ${connection.tokenSource}`
    : `no token: set TAGSCHED_TOKEN, or run \`tagsched-admin login\` to keep one in ${connection.configPath}`;
}

/** The AdminError a GraphQL answer stands for, or null when its data can be used. */
export function errorOfAnswer(connection: Connection, status: number, body: unknown): AdminError | null {
  const errors = ((body as { errors?: GraphqlError[] } | null)?.errors ?? []).filter((e) => e && typeof e === 'object');
  const first = errors[0];
  if (first) {
    const code = first.extensions?.code ?? (status === 401 ? 'UNAUTHENTICATED' : null);
    const message = errors.map((e) => e.message ?? '(no message)').join('; ');
    if (code === 'GRAPHQL_VALIDATION_FAILED' || code === 'GRAPHQL_PARSE_FAILED') {
      return new AdminError(
        `the server does not know this operation (is it an older or newer tagsched?): ${message}`,
        EXIT.generic,
        code,
      );
    }
    const exit = code ? exitCodeOf(code) : status >= 500 ? EXIT.generic : EXIT.invalidInput;
    return new AdminError(message, exit, code, exit === EXIT.auth ? [authHint(connection)] : []);
  }
  if (status === 401)
    return new AdminError('the server refused the token', EXIT.auth, 'UNAUTHENTICATED', [authHint(connection)]);
  const data = (body as { data?: unknown } | null)?.data;
  if (status < 200 || status >= 300 || !data || typeof data !== 'object') {
    return new AdminError(
      `${connection.serverUrl} answered HTTP ${status} without GraphQL data: is it a tagsched server's /graphql?`,
      EXIT.unreachable,
    );
  }
  return null;
}

/** Why a request did not reach the server, from fetch's rejection. */
function unreachable(connection: Connection, err: unknown, timeoutMs: number): AdminError {
  const e = err as { name?: string; cause?: { code?: string; message?: string }; message?: string };
  const reason =
    e.name === 'TimeoutError'
      ? `no answer within ${timeoutMs / 1000} s`
      : (e.cause?.code ?? e.cause?.message ?? e.message ?? String(err));
  return new AdminError(`cannot reach the server at ${connection.serverUrl}: ${reason}`, EXIT.unreachable, null, [
    'is it running? (the address comes from --server, TAGSCHED_SERVER_URL or the config file)',
  ]);
}

/** The client for a connection; requests time out after `timeoutMs`. */
export function createApi(connection: Connection, options: { timeoutMs: number; fetch?: typeof fetch }): Api {
  const doFetch = options.fetch ?? fetch;

  async function request(document: string, variables: Json): Promise<Json> {
    let answer: { status: number; body: unknown };
    try {
      answer = await postGraphql({
        url: connection.serverUrl,
        token: connection.token,
        query: document,
        variables,
        timeoutMs: options.timeoutMs,
        fetch: doFetch,
      });
    } catch (err) {
      throw unreachable(connection, err, options.timeoutMs);
    }
    const { status, body } = answer;
    const error = errorOfAnswer(connection, status, body);
    if (error) throw error;
    return (body as { data: Json }).data;
  }

  return {
    connection,
    query: (document, variables = {}) => request(document, variables) as Promise<any>,
    async mutate(document, variables, field) {
      const data = await request(document, variables);
      const result = data[field] as Partial<TypedError> | undefined;
      if (result && typeof result.code === 'string' && typeof result.message === 'string') {
        const error = new TypedErrorResult(result as TypedError, data);
        if (error.exitCode === EXIT.auth)
          throw new AdminError(error.message, error.exitCode, error.code, [authHint(connection)]);
        throw error;
      }
      return data as any;
    },
    subscribe(document, variables, onData, signal) {
      const url = new URL(connection.serverUrl);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      const client = createClient({
        url: url.toString(),
        webSocketImpl: WebSocket,
        lazy: true,
        retryAttempts: 5,
        connectionParams: connection.token ? { authorization: `Bearer ${connection.token}` } : {},
      });
      return new Promise<void>((resolve, reject) => {
        let finished = false;
        const finish = (err: AdminError | null) => {
          if (finished) return;
          finished = true;
          signal.removeEventListener('abort', onAbort);
          unsubscribe();
          void client.dispose();
          if (err) reject(err);
          else resolve();
        };
        const onAbort = () => finish(null);
        const unsubscribe = client.subscribe(
          { query: document, variables },
          {
            next: (value) => {
              if (value.errors?.length) finish(errorOfAnswer(connection, 200, { errors: value.errors }));
              else if (value.data) onData(value.data as Json);
            },
            error: (err) => finish(subscriptionError(connection, err)),
            complete: () => finish(null),
          },
        );
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      });
    },
  };
}

/** The AdminError of a subscription's failure: GraphQL errors, a close code, or a socket error. */
function subscriptionError(connection: Connection, err: unknown): AdminError {
  if (Array.isArray(err))
    return errorOfAnswer(connection, 200, { errors: err }) ?? new AdminError('the subscription failed', EXIT.generic);
  const close = err as { code?: unknown; reason?: unknown };
  if (close && typeof close.code === 'number') {
    if (close.code === 4401 || close.code === 4403)
      return new AdminError(
        `the server refused the token (${String(close.reason || close.code)})`,
        EXIT.auth,
        'UNAUTHENTICATED',
        [authHint(connection)],
      );
    if (close.code === 4429)
      return new AdminError(
        `the server refused the connection: ${String(close.reason || 'too many')}`,
        EXIT.auth,
        'RATE_LIMITED',
      );
    return new AdminError(
      `the WebSocket to ${connection.serverUrl} closed (${close.code}${close.reason ? `: ${String(close.reason)}` : ''})`,
      EXIT.unreachable,
    );
  }
  return unreachable(connection, err, 0);
}
