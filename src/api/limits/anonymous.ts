import type { IncomingMessage } from 'node:http';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { readCookie, SESSION_COOKIE } from '../status/session.js';

const WINDOW_SECONDS = 60; // TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE counts in windows of a minute

/**
 * Per-address bounds for callers without a token (docs/design.md: limits and tokens), counted in this process's memory:
 * requests per minute (an HTTP request with no token or session cookie, and each operation over an
 * anonymous WebSocket), and anonymous WebSockets open at once. A caller with a token is bounded by the
 * token's own limits and the failure throttle instead. 0 turns either off. Both defaults are far above
 * what people reloading status pages or a dashboard polling send.
 */
export function createAnonymousLimits(settings: { requestsPerMinute: number; connectionsPerAddress: number }) {
  const requests = new RateLimiterMemory({ points: Math.max(1, settings.requestsPerMinute), duration: WINDOW_SECONDS });
  const open = new Map<string, number>();
  return {
    settings,
    /** Counts one anonymous request of this address: 0 when it may go on, else the milliseconds before it may. */
    async request(address: string): Promise<number> {
      if (settings.requestsPerMinute <= 0) return 0;
      try {
        await requests.consume(address);
        return 0;
      } catch (res) {
        if (res instanceof RateLimiterRes) return Math.max(1, res.msBeforeNext);
        throw res;
      }
    },
    /** Takes a place for an anonymous WebSocket of this address; false when it has its limit open already. */
    openConnection(address: string): boolean {
      const n = open.get(address) ?? 0;
      if (settings.connectionsPerAddress > 0 && n >= settings.connectionsPerAddress) return false;
      open.set(address, n + 1);
      return true;
    },
    /** Gives back the place of a closed anonymous WebSocket. */
    closeConnection(address: string): void {
      const n = (open.get(address) ?? 1) - 1;
      if (n > 0) open.set(address, n);
      else open.delete(address);
    },
  };
}
export type AnonymousLimits = ReturnType<typeof createAnonymousLimits>;

/** Whether an HTTP request carries no credentials: no Authorization header and no status-page session cookie. */
export function isAnonymousRequest(req: IncomingMessage): boolean {
  return !req.headers.authorization && readCookie(req.headers.cookie, SESSION_COOKIE) === null;
}

/** What an anonymous caller over its request limit is told (HTTP 429, or the operation's error over WebSocket). */
export function anonymousRateMessage(retryAfterMs: number): string {
  return `too many requests without a token from this address: retry in ${Math.ceil(retryAfterMs / 1000)} s, or send a token (TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE)`;
}
