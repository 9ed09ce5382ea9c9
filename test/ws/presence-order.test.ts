/**
 * A worker that reconnects while its old connection closes stays connected: the server writes each
 * worker's presence in the order of its connections' events, and a disconnection decides, when it is
 * written, whether a newer connection is open. (Written the other way round, "disconnected" could land
 * after the new connection's "connected", and the worker, connected, got no work.)
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { registerWorker } from '../helpers/fixtures.js';
import { wsClient } from '../helpers/ws.js';

const t = useTestApp();
let url = '';
let token = '';

beforeAll(async () => {
  ({ url } = await t.app.start());
  token = await registerWorker(t, 'reconnecting');
});

const connectedAt = async () =>
  (await t.gql(`{ worker(name: "reconnecting") { connectedAt } }`)).data!.worker.connectedAt as string | null;

describe('presence in the order of connections', () => {
  it('a connection closed as the next one opens leaves the worker connected, every time', async () => {
    let current = wsClient(url, token);
    for (let i = 0; i < 20; i++) {
      for (let k = 0; k < 50 && !(await connectedAt()); k++) await new Promise((r) => setTimeout(r, 20));
      expect(await connectedAt(), `round ${i}: connected before the switch`).not.toBeNull();
      const switchedAt = Date.now();
      const next = wsClient(url, token);
      await current.client.dispose(); // the close and the new connection reach the server together
      current = next;
      // The new connection's "connected" is written (a time after the switch); then, a moment later, the
      // old one's "disconnected" must not have undone it. Written out of order, the worker would stay
      // disconnected for good. Looked at for seconds, not a fixed moment: a loaded machine is late.
      const newer = async () => {
        const at = await connectedAt();
        return at !== null && new Date(at).getTime() >= switchedAt - 5;
      };
      for (let k = 0; k < 250 && !(await newer()); k++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));
      expect(await connectedAt(), `round ${i}: the new connection is open`).not.toBeNull();
    }
    await current.client.dispose();
    for (let k = 0; k < 100 && (await connectedAt()); k++) await new Promise((r) => setTimeout(r, 20));
    expect(await connectedAt()).toBeNull();
  });
});
