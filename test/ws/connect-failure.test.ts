/**
 * A WebSocket whose init the server cannot complete because its database did not answer is told to
 * try again later (1013, which graphql-ws clients retry by themselves), not closed with graphql-ws's
 * internal error (4500, with a stack printed on stderr). And the process does not count that
 * connection as one of the worker's: its next connection's end is recorded as a disconnection.
 * The failure is PostgreSQL's own: a trigger refuses the statement that records the worker connected.
 */
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { registerWorker } from '../helpers/fixtures.js';
import { wsClient } from '../helpers/ws.js';
import { until } from '../faults/harness.js';

const t = useTestApp();
let url: string;
beforeAll(async () => {
  ({ url } = await t.app.start());
});
afterEach(() => vi.restoreAllMocks());

const connected = async (name: string) => (await t.sql<{ connected: boolean }>(`select connected_at is not null as connected from worker where name = ?`, [name]))[0].connected;

describe('a connection the database could not record', () => {
  it('is told to try again later, and is not counted as the worker’s', async () => {
    const token = await registerWorker(t, 'unrecorded');
    const printed = vi.spyOn(console, 'error');
    await t.sql(`create function refuse_connected() returns trigger language plpgsql as $$ begin raise exception 'refused by the test'; end $$`);
    await t.sql(
      `create trigger refuse_connected before update of connected_at on worker for each row
       when (old.name = 'unrecorded' and new.connected_at is not null) execute function refuse_connected()`,
    );

    const refused = wsClient(url, token);
    expect(await refused.closed).toEqual({ code: 1013, reason: 'Try again later: the server could not accept the connection now' });
    expect(printed).not.toHaveBeenCalled();
    expect(await connected('unrecorded')).toBe(false);

    await t.sql(`drop trigger refuse_connected on worker`);
    const next = wsClient(url, token);
    await until('the worker to be connected', () => connected('unrecorded'), 30_000, 50);
    await next.client.dispose();
    await until('its disconnection to be recorded', async () => !(await connected('unrecorded')), 30_000, 50);
  }, 90_000);
});
