const WINDOW_MS = 60_000; // TAGSCHED_AUTH_FAILURES_PER_MINUTE counts failures in a window of a minute
const SWEEP_EVERY_MS = WINDOW_MS;

/** One address's failures in the current window, and its lookups under way. */
interface AddressState {
  windowStart: number;
  failures: number;
  inFlight: number;
  waiters: (() => void)[];
}

/** A token lookup that was let through: say how it ended, exactly once. */
export interface AuthAttempt {
  /** The token was good: the attempt counts for nothing. */
  succeeded(): void;
  /** The token was refused: the attempt counts as a failure of its address. */
  failed(): void;
}

/**
 * Failed authentications per client address (docs/design.md: limits and tokens): an address may fail `failuresPerMinute`
 * times in a window of a minute; after that its attempts with a token are refused with 429 until the
 * window ends, before the token is even looked up, so guessing costs the guesser time and the database
 * nothing. HTTP and WebSocket share one throttle per process. Anonymous requests (no token) are not
 * throttled here: they prove nothing.
 *
 * An attempt is reserved before its lookup: the lookups under way from an address plus its failures
 * never exceed the limit, so guesses sent all at once are cut at the limit exactly (a count taken after
 * the lookup would let every concurrent guess through). A good token gives its reservation back; an
 * attempt that finds every place taken by lookups under way waits for one of them to end rather than
 * being refused, so a burst of good tokens from one address (agents behind one NAT) is only queued.
 * The counts are kept in this process's memory and updated synchronously, which is what makes the
 * reservation exact.
 */
export function createAuthThrottle(failuresPerMinute: number, now: () => number = Date.now) {
  const limit = failuresPerMinute;
  const states = new Map<string, AddressState>();
  let lastSweep = now();

  function stateOf(address: string): AddressState {
    const t = now();
    if (t - lastSweep >= SWEEP_EVERY_MS) {
      lastSweep = t;
      for (const [a, s] of states)
        if (t - s.windowStart >= WINDOW_MS && s.inFlight === 0 && s.waiters.length === 0) states.delete(a);
    }
    let s = states.get(address);
    if (!s) states.set(address, (s = { windowStart: t, failures: 0, inFlight: 0, waiters: [] }));
    else if (t - s.windowStart >= WINDOW_MS) {
      s.windowStart = t;
      s.failures = 0;
    }
    return s;
  }

  /**
   * A lookup under way ended: its place goes to the first attempt waiting (one, not all: waking every
   * waiter at each release made a burst of a thousand agents behind one address cost a quadratic
   * number of wake-ups), or, once the address has failed its limit, every waiter learns it is refused.
   */
  function release(s: AddressState): void {
    s.inFlight--;
    if (s.failures >= limit) for (const wake of s.waiters.splice(0)) wake();
    else s.waiters.shift()?.();
  }

  return {
    /**
     * Reserves a lookup for this address: an attempt to report on, or the milliseconds before the
     * address may try again (its failures have reached the limit in this window).
     */
    async reserve(address: string): Promise<AuthAttempt | number> {
      if (limit <= 0) return { succeeded() {}, failed() {} };
      for (let woken = false; ; woken = true) {
        const s = stateOf(address);
        if (s.failures >= limit) return Math.max(1, s.windowStart + WINDOW_MS - now());
        if (s.failures + s.inFlight < limit) {
          s.inFlight++;
          let done = false;
          return {
            succeeded() {
              if (done) return;
              done = true;
              release(s);
            },
            failed() {
              if (done) return;
              done = true;
              stateOf(address).failures++;
              release(s);
            },
          };
        }
        // In line for a place; one woken whose place a newcomer took first goes back to the front.
        await new Promise<void>((resolve) => (woken ? s.waiters.unshift(resolve) : s.waiters.push(resolve)));
      }
    },
  };
}
export type AuthThrottle = ReturnType<typeof createAuthThrottle>;

/** The error a throttled client gets (HTTP 429, or a WebSocket closed with 4429), naming the setting. */
export function throttledMessage(retryAfterMs: number): string {
  return `too many failed authentications from this address: retry in ${Math.ceil(retryAfterMs / 1000)} s (TAGSCHED_AUTH_FAILURES_PER_MINUTE)`;
}
