import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';

const WINDOW_SECONDS = 60; // TAGSCHED_AUTH_FAILURES_PER_MINUTE counts failures in this window

/**
 * Failed authentications per client address (DESIGN §15): once an address has failed
 * `failuresPerMinute` times in a window of a minute, its attempts with a token are refused with 429
 * until that window ends, before the token is even
 * looked up, so guessing costs the guesser time and the database nothing. HTTP and WebSocket share
 * one throttle per process. Anonymous requests (no token) are not throttled: they prove nothing.
 */
export function createAuthThrottle(failuresPerMinute: number) {
  const limiter = new RateLimiterMemory({ points: Math.max(1, failuresPerMinute), duration: WINDOW_SECONDS });
  return {
    /** Milliseconds before this address may try again, or 0 when it may now. */
    async retryAfterMs(address: string): Promise<number> {
      if (failuresPerMinute <= 0) return 0;
      const state = await limiter.get(address);
      return state && state.remainingPoints <= 0 ? Math.max(1, state.msBeforeNext) : 0;
    },
    /** Counts a failed authentication of this address. */
    async failed(address: string): Promise<void> {
      if (failuresPerMinute <= 0) return;
      await limiter.consume(address).catch((res: unknown) => {
        if (!(res instanceof RateLimiterRes)) throw res;
      });
    },
  };
}
export type AuthThrottle = ReturnType<typeof createAuthThrottle>;

/** The error a throttled client gets (HTTP 429, or a WebSocket closed with 4429), naming the setting. */
export function throttledMessage(retryAfterMs: number): string {
  return `too many failed authentications from this address: retry in ${Math.ceil(retryAfterMs / 1000)} s (TAGSCHED_AUTH_FAILURES_PER_MINUTE)`;
}
