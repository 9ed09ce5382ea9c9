/**
 * stop() waits for the GraphQL operations running when it begins (src/http/operations-in-flight.ts):
 * those, not the ones that begin later, and not for longer than its bound.
 */
import { describe, expect, it } from 'vitest';
import { trackOperationsInFlight } from '../../src/http/operations-in-flight.js';

/** Begins one operation as envelop does (its onExecute hook); returns the function that ends it. */
function begin(tracker: ReturnType<typeof trackOperationsInFlight>): () => void {
  const hooks = (tracker.plugin.onExecute as (payload: unknown) => { onExecuteDone: (payload: unknown) => void })({});
  return () => hooks.onExecuteDone({});
}

describe('operations in flight', () => {
  it('drain resolves at once when none is running', async () => {
    const tracker = trackOperationsInFlight();
    expect(await tracker.drain(10_000)).toBe(true);
  });

  it('drain waits for the operations running when it is called, not for later ones', async () => {
    const tracker = trackOperationsInFlight();
    const endFirst = begin(tracker);
    const endSecond = begin(tracker);
    expect(tracker.running).toBe(2);
    let drained: boolean | null = null;
    const drain = tracker.drain(10_000).then((r) => (drained = r));
    const endLater = begin(tracker); // begun after the drain: not waited for
    endFirst();
    await new Promise((r) => setTimeout(r, 20));
    expect(drained).toBeNull(); // the second is still running
    endSecond();
    await drain;
    expect(drained).toBe(true);
    expect(tracker.running).toBe(1);
    endLater();
    expect(tracker.running).toBe(0);
  });

  it('drain gives up after its bound, answering false', async () => {
    const tracker = trackOperationsInFlight();
    begin(tracker); // never ends
    const started = Date.now();
    expect(await tracker.drain(50)).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  });
});
