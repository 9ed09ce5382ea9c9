/**
 * A server that stops records the workers connected to it disconnected, so that no other process's
 * pass gives them work they cannot receive. A worker's calls that server answers meanwhile (a
 * heartbeat, a pull, a metadata report: HTTP is still served while it stops) mark the worker seen,
 * and must not mark it connected again after that record.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/server/app.js';
import { createLogger } from '../../src/core/log.js';
import { secondAppConfig, useTestApp } from '../helpers/app.js';
import { AMD64_METADATA, registerWorker } from '../helpers/fixtures.js';
import { wsClient } from '../helpers/ws.js';
import { until } from '../faults/harness.js';

const t = useTestApp();
let b: App | undefined;
let release: () => void = () => undefined;
afterAll(async () => {
  release();
  await b?.stop().catch(() => undefined);
});

const presence = async (name: string) =>
  (
    await t.sql<{ connected: boolean; seen_ms: string }>(
      `select connected_at is not null as connected, extract(epoch from last_seen_at) * 1000 as seen_ms from worker where name = ?`,
      [name],
    )
  )[0];

describe('a stopping server', () => {
  it('answers a worker’s heartbeat, pull and metadata report without marking it connected again', async () => {
    const token = await registerWorker(t, 'leaving');
    const app = (b = await buildApp(secondAppConfig(t), { log: createLogger('silent') }));
    const { url } = await app.start();
    const { client } = wsClient(url, token);
    try {
      await until('the worker to be connected', async () => (await presence('leaving')).connected, 30_000, 50);

      // Its stop is held once it has recorded its workers disconnected, before its database closes.
      const gate = new Promise<void>((resolve) => (release = resolve));
      let atGate!: () => void;
      const held = new Promise<void>((resolve) => (atGate = resolve));
      const closeEvents = app.events.close!.bind(app.events);
      app.events.close = async () => {
        atGate();
        await gate;
        await closeEvents();
      };
      const stopped = app.stop();
      await held;
      const before = await presence('leaving');
      expect(before.connected).toBe(false);

      // The calls go to the stopping app's GraphQL handler (its listening socket is closed by now).
      const call = async (query: string, variables: Record<string, unknown> = {}) => {
        const res = await app.yoga.fetch('http://tagsched.test/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ query, variables }),
        });
        const body = (await res.json()) as { data?: Record<string, { __typename: string }>; errors?: unknown };
        expect(body.errors, JSON.stringify(body)).toBeUndefined();
        return body.data!;
      };
      await new Promise((r) => setTimeout(r, 5)); // last_seen_at moves on
      expect((await call(`mutation { heartbeat(input: {}) { __typename } }`)).heartbeat.__typename).toBe(
        'HeartbeatPayload',
      );
      expect(
        (
          await call(
            `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
            { m: AMD64_METADATA },
          )
        ).reportWorkerMetadata.__typename,
      ).toBe('Worker');
      expect((await call(`mutation { requestWork { __typename } }`)).requestWork.__typename).toBe('RequestWorkPayload');

      const after = await presence('leaving');
      expect(Number(after.seen_ms)).toBeGreaterThan(Number(before.seen_ms));
      expect(after.connected).toBe(false);
      release();
      await stopped;
      b = undefined;
    } finally {
      await client.dispose();
    }
  }, 90_000);
});
