import { describe, expect, it } from 'vitest';
import {
  AuthError,
  authFailureOf,
  createHttpRequest,
  errorOfResponse,
  ProtocolError,
  TransientError,
} from '../../src/agent/client.js';
import { createApi } from '../../src/agent/operations.js';

const gqlError = (message: string, code?: string) => ({ message, ...(code ? { extensions: { code } } : {}) });

describe('errorOfResponse', () => {
  it.each<[string, number, unknown, (new (m: string) => Error) | null]>([
    ['data', 200, { data: { heartbeat: {} } }, null],
    ['HTTP 401', 401, { errors: [gqlError('the bearer token is not valid', 'UNAUTHENTICATED')] }, AuthError],
    ['HTTP 403 without a body', 403, null, AuthError],
    ['UNAUTHENTICATED in a 200', 200, { data: null, errors: [gqlError('no', 'UNAUTHENTICATED')] }, AuthError],
    ['FORBIDDEN (not a worker token)', 200, { errors: [gqlError('workers only', 'FORBIDDEN')] }, AuthError],
    ['HTTP 502 from a proxy', 502, null, TransientError],
    ['HTTP 503', 503, { errors: [gqlError('down')] }, TransientError],
    ['HTTP 429', 429, null, TransientError],
    [
      'a masked server error (database down)',
      200,
      { data: null, errors: [gqlError('Unexpected error.', 'INTERNAL_SERVER_ERROR')] },
      TransientError,
    ],
    [
      'a validation error (schema mismatch)',
      400,
      { errors: [gqlError('Cannot query field "heartbeat"', 'GRAPHQL_VALIDATION_FAILED')] },
      ProtocolError,
    ],
    ['a 404 page', 404, null, ProtocolError],
    ['a 200 without data', 200, {}, ProtocolError],
  ])('%s', (_name, status, body, kind) => {
    const error = errorOfResponse(status, body);
    if (kind === null) expect(error).toBeNull();
    else expect(error).toBeInstanceOf(kind);
  });
});

describe('authFailureOf', () => {
  it.each<[string, unknown, boolean]>([
    ['a 4401 close', { code: 4401, reason: 'Unauthorized: the bearer token is not valid' }, true],
    ['a 4403 close', { code: 4403, reason: 'Forbidden' }, true],
    ['UNAUTHENTICATED from the subscription', [gqlError('no', 'UNAUTHENTICATED')], true],
    ['a 1006 close (cut)', { code: 1006, reason: '' }, false],
    ['a 4500 close (server error)', { code: 4500, reason: 'Internal server error' }, false],
    [
      'a 1013 close (its database did not answer)',
      { code: 1013, reason: 'Try again later: the server could not reach its database' },
      false,
    ],
    ['a 4499 (terminated after a lost ping)', { code: 4499, reason: 'Terminated' }, false],
    ['ECONNREFUSED', new Error('connect ECONNREFUSED'), false],
    ['a GraphQL error of another kind', [gqlError('boom', 'INTERNAL_SERVER_ERROR')], false],
  ])('%s', (_name, err, refused) => {
    expect(authFailureOf(err) !== null).toBe(refused);
  });
});

describe('createHttpRequest', () => {
  /** A fetch that records the request and answers with `status` and `body`. */
  function fakeFetch(status: number, body: unknown) {
    const seen: { url: string; init: RequestInit }[] = [];
    const fetch = (async (url: string, init: RequestInit) => {
      seen.push({ url, init });
      return new Response(typeof body === 'string' ? body : JSON.stringify(body), { status });
    }) as unknown as typeof globalThis.fetch;
    return { fetch, seen };
  }

  it('posts the operation with the bearer token and returns its data', async () => {
    const { fetch, seen } = fakeFetch(200, {
      data: { startWorkRequest: { __typename: 'WorkRequest', id: '5', status: 'RUNNING' } },
    });
    const api = createApi(createHttpRequest({ url: 'http://s/graphql', token: 'tok', timeoutMs: 1000, fetch }));
    expect(await api.startWorkRequest('5')).toEqual({ ok: true, value: { id: '5', status: 'RUNNING' } });
    expect(seen[0].url).toBe('http://s/graphql');
    expect((seen[0].init.headers as Record<string, string>).authorization).toBe('Bearer tok');
    expect(JSON.parse(seen[0].init.body as string)).toMatchObject({ variables: { id: '5' } });
  });

  it('returns a typed error as a value', async () => {
    const { fetch } = fakeFetch(200, {
      data: {
        completeWorkRequest: {
          __typename: 'NotFoundError',
          code: 'NOT_FOUND',
          message: 'no such work request for this worker',
        },
      },
    });
    const api = createApi(createHttpRequest({ url: 'http://s/graphql', token: 't', timeoutMs: 1000, fetch }));
    expect(await api.completeWorkRequest('5', 'SUCCESS')).toEqual({
      ok: false,
      error: { type: 'NotFoundError', code: 'NOT_FOUND', message: 'no such work request for this worker' },
    });
  });

  it('turns a refused connection into a TransientError', async () => {
    const request = createHttpRequest({ url: 'http://127.0.0.1:1/graphql', token: 't', timeoutMs: 1000 });
    await expect(request('{ __typename }')).rejects.toBeInstanceOf(TransientError);
  });

  it('turns a 401 into an AuthError', async () => {
    const { fetch } = fakeFetch(401, { errors: [gqlError('the bearer token is not valid', 'UNAUTHENTICATED')] });
    await expect(
      createHttpRequest({ url: 'http://s', token: 't', timeoutMs: 1000, fetch })('{ x }'),
    ).rejects.toBeInstanceOf(AuthError);
  });

  it('reads the heartbeat’s unacknowledged assignments', async () => {
    const { fetch } = fakeFetch(200, {
      data: {
        heartbeat: {
          __typename: 'HeartbeatPayload',
          draining: false,
          assignedWorkRequests: [{ id: '9', taskType: 'worker', taskName: 'noop', taskData: {} }],
        },
      },
    });
    const api = createApi(createHttpRequest({ url: 'http://s', token: 't', timeoutMs: 1000, fetch }));
    expect(await api.heartbeat({ shuttingDown: false, running: [] })).toEqual({
      ok: true,
      value: { draining: false, assigned: [{ id: '9', taskType: 'worker', taskName: 'noop', taskData: {} }] },
    });
  });
});
