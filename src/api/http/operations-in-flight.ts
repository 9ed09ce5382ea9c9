import type { Plugin } from 'graphql-yoga';

/**
 * The GraphQL requests and operations this process is answering: an HTTP request from its arrival at
 * yoga to its response (its token lookup included, which comes before the execution), and every
 * execution (over a WebSocket too: both go through the app's enveloped execute). stop() waits for
 * those already running when it begins before it records its workers disconnected (a heartbeat, pull
 * or metadata report that read "not stopping" could otherwise mark a worker connected after that
 * record) and again before it closes the database (so that none fails on a closed pool).
 * Subscriptions are not counted: they end with their sockets.
 */
export interface OperationsInFlight {
  /** The yoga plugin that counts them. */
  readonly plugin: Plugin;
  /** How many are running. */
  readonly running: number;
  /**
   * Resolves once every operation running now has ended (later ones are not waited for), or after
   * `timeoutMs`, whichever comes first; true when they all ended.
   */
  drain(timeoutMs: number): Promise<boolean>;
}

export function trackOperationsInFlight(): OperationsInFlight {
  const running = new Set<Promise<void>>();
  /** Counts one operation until the function it answers is called. */
  const begin = (): (() => void) => {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    running.add(ended);
    return () => {
      running.delete(ended);
      end();
    };
  };
  // By the request yoga was given: no plugin of the app replaces it (setRequest) between the two hooks.
  const requests = new WeakMap<Request, () => void>();
  return {
    plugin: {
      onRequest({ request }) {
        requests.set(request, begin());
      },
      onResponse({ request }) {
        requests.get(request)?.();
        requests.delete(request);
      },
      onExecute() {
        const end = begin();
        return { onExecuteDone: end };
      },
    },
    get running() {
      return running.size;
    },
    async drain(timeoutMs) {
      if (!running.size) return true;
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
      try {
        return await Promise.race([Promise.all([...running]).then(() => true as const), late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
