/**
 * How long the agent waits before trying again (a reconnect, a result that did not go through),
 * and the wait itself, which a restored connection cuts short.
 */

/** The first retry waits between half of this and this, in milliseconds; each later one doubles it. */
export const BASE_BACKOFF_MS = 500;

/**
 * Exponential backoff with "equal jitter": attempt n (from 0) waits a random time in
 * [d/2, d], where d = min(maxMs, BASE_BACKOFF_MS × 2^n). Never zero, never above the cap, and
 * spread out so that a thousand agents cut at once do not reconnect in one burst.
 */
export function backoffDelay(attempt: number, maxMs: number, random: () => number = Math.random): number {
  // 2^31 × 500 ms is already decades: clamping the exponent keeps the arithmetic finite.
  const ceiling = Math.min(maxMs, BASE_BACKOFF_MS * 2 ** Math.min(Math.max(attempt, 0), 31));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** Thrown by {@link Waker.sleep} and {@link retry} when their signal aborts: the agent stops trying. */
export class StoppedError extends Error {
  override readonly name = 'StoppedError';
}

/**
 * Sleeps that can be woken early: when the WebSocket reconnects, every result waiting out its
 * backoff is tried at once instead of at the end of a long wait.
 */
export class Waker {
  private readonly sleepers = new Set<() => void>();

  /** Resolves after `ms`, or at the next {@link wakeAll}; rejects with {@link StoppedError} when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(new StoppedError('stopped'));
      const done = () => {
        clearTimeout(timer);
        this.sleepers.delete(done);
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        done();
        reject(new StoppedError('stopped'));
      };
      const timer = setTimeout(done, ms);
      this.sleepers.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Ends every pending sleep now. */
  wakeAll(): void {
    for (const wake of [...this.sleepers]) wake();
  }
}

/** How {@link retry} tries again. */
export interface RetryOptions {
  /** Whether this failure is worth another attempt; any other is rethrown at once. */
  shouldRetry(err: unknown): boolean;
  maxBackoffMs: number;
  /** Aborting it ends the waiting with a StoppedError. */
  signal?: AbortSignal;
  /** Lets a restored connection cut the wait short. */
  waker?: Waker;
  /** Called before each wait, to log it. */
  onRetry?(err: unknown, attempt: number, delayMs: number): void;
}

/** Calls `fn` until it succeeds, waiting {@link backoffDelay} between attempts that failed for a retryable reason. */
export async function retry<T>(fn: () => Promise<T>, o: RetryOptions): Promise<T> {
  const waker = o.waker ?? new Waker();
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!o.shouldRetry(err)) throw err;
      const delayMs = backoffDelay(attempt, o.maxBackoffMs);
      o.onRetry?.(err, attempt + 1, delayMs);
      await waker.sleep(delayMs, o.signal);
    }
  }
}
