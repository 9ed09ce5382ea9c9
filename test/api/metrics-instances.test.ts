/**
 * The instances gauge of /metrics (docs/design.md: operating): live instances by pool and state, a zero for each
 * pool and live state with none, finished instances left out; labels bounded by the pools' names.
 */
import type { PromData } from 'prom2javascript';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseMetrics } from '../helpers/metrics.js';
import { LIVE_INSTANCE_STATES } from '../../src/core/instance-state.js';
import { useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS, createPool, expectResult } from '../helpers/fixtures.js';

const t = useTestApp({ providers: { execCommands: ['/bin/true'] } });
let base: string;

beforeAll(async () => {
  const { url } = await t.app.start();
  base = url.replace(/\/graphql$/, '');
});

async function instanceSamples(): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const metrics = await parseMetrics(text);
  expect(metrics.tagsched_instances?.type).toBe('gauge');
  return Object.fromEntries(
    (metrics.tagsched_instances.data as PromData[]).map((d) => [`${d.labels.pool} ${d.labels.state}`, d.value]),
  );
}

const createInstance = (pool: string, name: string) =>
  expectResult(
    t,
    'InstanceLaunchPayload',
    `mutation($i: CreateInstanceInput!) { createInstance(input: $i) { __typename ${ERROR_FIELDS} } }`,
    { i: { pool, name } },
  );

describe('tagsched_instances', () => {
  it('counts live instances by pool and state, with zeros, and leaves finished ones out', async () => {
    await createPool(t, {
      name: 'busy',
      providerType: 'exec',
      specifications: { command: ['/bin/true'] },
      enabled: false,
    });
    await createPool(t, {
      name: 'quiet',
      providerType: 'exec',
      specifications: { command: ['/bin/true'] },
      enabled: false,
    });
    for (const name of ['busy-1', 'busy-2', 'busy-3']) await createInstance('busy', name);
    await expectResult(
      t,
      'Instance',
      `mutation { recordInstanceStopped(input: { name: "busy-3" }) { __typename ${ERROR_FIELDS} } }`,
    );

    const samples = await instanceSamples();
    const expected: Record<string, number> = {};
    for (const pool of ['busy', 'quiet']) for (const state of LIVE_INSTANCE_STATES) expected[`${pool} ${state}`] = 0;
    expected['busy LAUNCHING'] = 2;
    expect(samples).toEqual(expected);
    // What the database holds, counted another way: the stopped one is there, and not in the gauge.
    const rows = await t.sql<{ state: string; n: number }>(
      `select state, count(*)::int as n from instance group by state order by state`,
    );
    expect(rows).toEqual([
      { state: 'LAUNCHING', n: 2 },
      { state: 'TERMINATED', n: 1 },
    ]);
  });
});
