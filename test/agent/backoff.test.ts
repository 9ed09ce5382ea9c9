import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffDelay, BASE_BACKOFF_MS, retry, StoppedError, Waker } from '../../src/agent/backoff.js';

class Flaky extends Error {}

describe('backoffDelay', () => {
  it.each<[number, number, number, number]>([
    // attempt, cap, delay with random() = 0, delay with random() = 1
    [0, 30_000, BASE_BACKOFF_MS / 2, BASE_BACKOFF_MS],
    [1, 30_000, BASE_BACKOFF_MS, 2 * BASE_BACKOFF_MS],
    [3, 30_000, 4 * BASE_BACKOFF_MS, 8 * BASE_BACKOFF_MS],
    [6, 30_000, 15_000, 30_000],
    [1000, 30_000, 15_000, 30_000],
    [0, 100, 50, 100],
  ])('attempt %d capped at %d ms waits %d to %d ms', (attempt, cap, low, high) => {
    expect(backoffDelay(attempt, cap, () => 0)).toBe(low);
    expect(backoffDelay(attempt, cap, () => 1)).toBe(high);
  });

  it('stays within half the ceiling and the ceiling, and never over the cap', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000 }),
        fc.integer({ min: 1, max: 600_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (attempt, cap, r) => {
          const d = backoffDelay(attempt, cap, () => r);
          const ceiling = Math.min(cap, BASE_BACKOFF_MS * 2 ** Math.min(attempt, 31));
          return Number.isFinite(d) && d > 0 && d >= Math.floor(ceiling / 2) && d <= Math.min(cap, ceiling);
        },
      ),
    );
  });
});

describe('retry', () => {
  const fast = { maxBackoffMs: 5 };

  it('tries again after a retryable failure, and says so before each wait', async () => {
    let calls = 0;
    const waits: number[] = [];
    const value = await retry(
      async () => {
        calls += 1;
        if (calls < 3) throw new Flaky('down');
        return 'ok';
      },
      { ...fast, shouldRetry: (e) => e instanceof Flaky, onRetry: (_e, attempt) => waits.push(attempt) },
    );
    expect(value).toBe('ok');
    expect(calls).toBe(3);
    expect(waits).toEqual([1, 2]);
  });

  it('rethrows at once what is not retryable', async () => {
    let calls = 0;
    const boom = new Error('bad request');
    await expect(
      retry(
        async () => {
          calls += 1;
          throw boom;
        },
        { ...fast, shouldRetry: (e) => e instanceof Flaky },
      ),
    ).rejects.toBe(boom);
    expect(calls).toBe(1);
  });

  it('stops waiting when its signal aborts', async () => {
    const stop = new AbortController();
    const p = retry(
      async () => {
        throw new Flaky('down');
      },
      { maxBackoffMs: 60_000, shouldRetry: () => true, signal: stop.signal, onRetry: () => stop.abort() },
    );
    await expect(p).rejects.toBeInstanceOf(StoppedError);
  });
});

describe('Waker', () => {
  it('ends pending sleeps early', async () => {
    const waker = new Waker();
    const started = Date.now();
    const sleeping = waker.sleep(60_000);
    waker.wakeAll();
    await sleeping;
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('rejects a sleep whose signal is already aborted', async () => {
    await expect(new Waker().sleep(10, AbortSignal.abort())).rejects.toBeInstanceOf(StoppedError);
  });
});
