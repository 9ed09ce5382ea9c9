import { describe, expect, it } from 'vitest';
import { createAuthThrottle, type AuthAttempt } from '../../src/api/limits/auth-throttle.js';

/** The throttle on a clock the test moves. */
function throttleAt(limit: number) {
  let t = 1_000_000;
  const throttle = createAuthThrottle(limit, () => t);
  return { throttle, advance: (ms: number) => (t += ms) };
}
const isAttempt = (r: AuthAttempt | number): r is AuthAttempt => typeof r !== 'number';

describe('the failed-authentication throttle', () => {
  it('lets at most `limit` lookups be under way or failed at once; the next waits, and is refused once they fail', async () => {
    const { throttle } = throttleAt(3);
    const first = await Promise.all([1, 2, 3].map(() => throttle.reserve('a')));
    expect(first.every(isAttempt)).toBe(true);
    let fourth: AuthAttempt | number | undefined;
    const waiting = throttle.reserve('a').then((r) => (fourth = r));
    await Promise.resolve();
    expect(fourth).toBeUndefined();
    for (const a of first) (a as AuthAttempt).failed();
    await waiting;
    expect(fourth).toBeGreaterThan(0);
    expect(fourth).toBeLessThanOrEqual(60_000);
  });

  it('serves a burst of good tokens from one address in order, waking one waiter per place freed', async () => {
    let clockReads = 0;
    const throttle = createAuthThrottle(30, () => (clockReads++, 1_000_000));
    const served: number[] = [];
    await Promise.all(
      Array.from({ length: 1_000 }, async (_, i) => {
        const a = await throttle.reserve('agents-behind-one-nat');
        expect(isAttempt(a)).toBe(true);
        served.push(i);
        await Promise.resolve(); // the lookup
        (a as AuthAttempt).succeeded();
      }),
    );
    expect(served).toHaveLength(1_000);
    expect(served).toEqual([...served].sort((x, y) => x - y)); // first come, first served
    // Each attempt looks at its address a few times, not once per place freed before its turn
    // (waking every waiter at each release read the clock some 17,000 times here).
    expect(clockReads).toBeLessThan(4_000);
  });

  it('a good token gives its place back: the waiting attempt goes ahead', async () => {
    const { throttle } = throttleAt(1);
    const first = (await throttle.reserve('a')) as AuthAttempt;
    const second = throttle.reserve('a');
    first.succeeded();
    const got = await second;
    expect(isAttempt(got)).toBe(true);
  });

  it('counts per address, forgets after the window, and reporting twice counts once', async () => {
    const { throttle, advance } = throttleAt(2);
    for (let i = 0; i < 2; i++) {
      const a = (await throttle.reserve('a')) as AuthAttempt;
      a.failed();
      a.failed();
      a.succeeded();
    }
    expect(typeof (await throttle.reserve('a'))).toBe('number');
    expect(isAttempt(await throttle.reserve('b'))).toBe(true);
    advance(60_000);
    expect(isAttempt(await throttle.reserve('a'))).toBe(true);
  });

  it('a limit of 0 turns it off', async () => {
    const { throttle } = throttleAt(0);
    for (let i = 0; i < 10; i++) ((await throttle.reserve('a')) as AuthAttempt).failed();
    expect(isAttempt(await throttle.reserve('a'))).toBe(true);
  });
});
