/**
 * The instance states and their sets have one home (src/core/instance-state.ts): each set's
 * TypeScript predicate and its SQL list say the same of every state, in PostgreSQL; live is every
 * state but the two ends, and launching-or-running is live but STOPPING.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  INSTANCE_STATE,
  INSTANCE_STATES,
  isLaunchingOrRunning,
  isLiveInstance,
  LAUNCHING_OR_RUNNING_SQL,
  LAUNCHING_OR_RUNNING_STATES,
  LIVE_INSTANCE_SQL,
  LIVE_INSTANCE_STATES,
} from '../../src/core/instance-state.js';
import { adminUrl } from '../helpers/pg-url.js';

const SETS = [
  ['live', LIVE_INSTANCE_STATES, isLiveInstance, LIVE_INSTANCE_SQL],
  ['launching or running', LAUNCHING_OR_RUNNING_STATES, isLaunchingOrRunning, LAUNCHING_OR_RUNNING_SQL],
] as const;

let client: pg.Client;
beforeAll(async () => {
  client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
});

describe('the instance states', () => {
  it('are the constants, in the order of an instance’s life, and make its sets', () => {
    expect(INSTANCE_STATES).toEqual(Object.values(INSTANCE_STATE));
    expect(INSTANCE_STATES).toEqual(['LAUNCHING', 'RUNNING', 'STOPPING', 'TERMINATED', 'FAILED']);
    expect(LIVE_INSTANCE_STATES).toEqual(INSTANCE_STATES.filter((s) => s !== 'TERMINATED' && s !== 'FAILED'));
    expect(LAUNCHING_OR_RUNNING_STATES).toEqual(LIVE_INSTANCE_STATES.filter((s) => s !== 'STOPPING'));
    expect(LAUNCHING_OR_RUNNING_SQL).toBe(`'LAUNCHING', 'RUNNING'`);
  });

  it.each(SETS)(
    '%s: the predicate and `state in (SQL)` agree on every state, and on an unknown one',
    async (_name, states, predicate, sql) => {
      const all = [...INSTANCE_STATES, 'NOT_A_STATE'];
      expect(all.filter(predicate)).toEqual(states);
      const { rows } = await client.query<{ member: boolean }>(
        `select s in (${sql}) as member from unnest($1::text[]) with ordinality as u(s, i) order by i`,
        [all],
      );
      expect(rows.map((r) => r.member)).toEqual(all.map(predicate));
    },
  );
});
