/**
 * stop() waits for the GraphQL requests and operations running when it begins
 * (src/api/http/operations-in-flight.ts): those, not the ones that begin later, and not for longer than its
 * bound; an HTTP request counts from its arrival, so its token lookup is waited for too.
 */
import { describe, expect, it } from 'vitest';
import { trackOperationsInFlight } from '../../src/api/http/operations-in-flight.js';

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

  it('counts an HTTP request from its arrival to its response, before and after its execution', async () => {
    const tracker = trackOperationsInFlight();
    const plugin = tracker.plugin as unknown as {
      onRequest: (payload: { request: Request }) => void;
      onResponse: (payload: { request: Request }) => void;
    };
    const request = new Request('http://test/graphql', { method: 'POST' });
    plugin.onRequest({ request }); // its token is being looked up: no execution yet
    expect(tracker.running).toBe(1);
    let drained: boolean | null = null;
    const drain = tracker.drain(10_000).then((r) => (drained = r));
    const endExecution = begin(tracker);
    endExecution();
    await new Promise((r) => setTimeout(r, 20));
    expect(drained).toBeNull(); // answered only once its response is made
    plugin.onResponse({ request });
    await drain;
    expect(drained).toBe(true);
    expect(tracker.running).toBe(0);
    plugin.onResponse({ request }); // a second response of the same request ends nothing more
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
