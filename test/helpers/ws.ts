import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';

/** A real graphql-ws client for a token; `closed` resolves with the close event's code and reason. */
export function wsClient(httpUrl: string, token: string | null, options: { retry?: boolean } = {}) {
  let resolveClosed: (v: { code: number; reason: string }) => void;
  const closed = new Promise<{ code: number; reason: string }>((r) => (resolveClosed = r));
  const client: Client = createClient({
    url: httpUrl.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    lazy: false,
    retryAttempts: options.retry ? 10 : 0,
    retryWait: () => new Promise((r) => setTimeout(r, 100)),
    connectionParams: token ? { authorization: `Bearer ${token}` } : {},
    on: {
      closed: (e) =>
        resolveClosed({ code: (e as { code: number }).code, reason: String((e as { reason: unknown }).reason) }),
    },
    onNonLazyError: () => undefined,
  });
  return { client, closed };
}

/** Subscribes and collects the events; `next(n)` waits until n have arrived. */
export function collect<T = Record<string, any>>(
  client: Client,
  query: string,
  variables: Record<string, unknown> = {},
) {
  const items: T[] = [];
  const errors: unknown[] = [];
  let waiters: (() => void)[] = [];
  let markCompleted: () => void = () => undefined;
  /** Resolves when the server ends the subscription. */
  const completed = new Promise<void>((r) => (markCompleted = r));
  const dispose = client.subscribe<T>(
    { query, variables },
    {
      next: (v) => {
        if (v.errors) errors.push(...v.errors);
        if (v.data) items.push(v.data as T);
        for (const w of waiters) w();
        waiters = [];
      },
      error: (e) => {
        errors.push(e);
        for (const w of waiters) w();
      },
      complete: () => markCompleted(),
    },
  );
  return {
    items,
    errors,
    completed,
    dispose,
    async next(n: number, timeoutMs = 10_000): Promise<T[]> {
      const deadline = Date.now() + timeoutMs;
      while (items.length < n) {
        if (errors.length) throw new Error(`subscription error: ${JSON.stringify(errors)}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} events, got ${items.length}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 50);
        });
      }
      return items.slice(0, n);
    },
  };
}

/**
 * A raw graphql-ws socket (no client library) that has sent its connection_init, with `token` when
 * given, from `localAddress` when given: its messages as they come, and how it closed.
 */
export async function initSocket(httpUrl: string, token: string | null, options: { localAddress?: string } = {}) {
  const socket = new WebSocket(
    httpUrl.replace(/^http/, 'ws'),
    'graphql-transport-ws',
    options.localAddress ? { localAddress: options.localAddress } : {},
  );
  const messages: Record<string, any>[] = [];
  socket.on('message', (data) => messages.push(JSON.parse(data.toString())));
  const closed = new Promise<{ code: number; reason: string }>((r) =>
    socket.once('close', (code, reason) => r({ code, reason: reason.toString() })),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  socket.send(JSON.stringify({ type: 'connection_init', payload: token ? { authorization: `Bearer ${token}` } : {} }));
  return { socket, messages, closed };
}
