import type { PromHistogramData } from 'prom2javascript';
import { beforeAll, describe, expect, it } from 'vitest';
import { spellNaN } from '../../src/api/metrics/endpoint.js';
import { parseMetrics } from '../helpers/metrics.js';
import { ANONYMOUS_OPERATION, MAX_OPERATION_NAMES, OTHER_OPERATION } from '../../src/api/metrics/process-metrics.js';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();
let base: string;

beforeAll(async () => {
  const { url } = await t.app.start();
  base = url.replace(/\/graphql$/, '');
});

async function operationCounts(): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const metrics = await parseMetrics(text);
  const data = metrics.tagsched_graphql_request_duration_seconds.data as PromHistogramData[];
  return new Map(data.map((h) => [`${h.labels.type} ${h.labels.operation}`, h.count]));
}

describe('the operation label of GraphQL durations', () => {
  it('names the operations of token holders, up to a cap; unnamed ones, anonymous callers’ new names and the rest fold into fixed values', async () => {
    await t.gql('query Dashboard { workerPools { name } }');
    await t.gql('{ workerPools { name } }');
    await t.gql('query Dashboard { workerPools { name } }', {}, null); // a name already known is kept for anyone
    await t.gql('query NeverSeenBefore { workerPools { name } }', {}, null);
    let counts = await operationCounts();
    expect(counts.get('query Dashboard')).toBe(2);
    expect(counts.get(`query ${ANONYMOUS_OPERATION}`)).toBe(1);
    expect(counts.get(`query ${OTHER_OPERATION}`)).toBe(1);
    expect(counts.has('query NeverSeenBefore')).toBe(false);

    for (let i = 0; i < MAX_OPERATION_NAMES + 20; i++) await t.gql(`query Generated${i} { workerPools { name } }`);
    await t.gql(`query ${'L'.repeat(65)} { workerPools { name } }`);
    counts = await operationCounts();
    const named = [...counts.keys()].filter((k) => !k.endsWith(ANONYMOUS_OPERATION) && !k.endsWith(OTHER_OPERATION));
    expect(named.length).toBe(MAX_OPERATION_NAMES);
    expect(counts.get(`query ${OTHER_OPERATION}`)).toBe(1 + 21 + 1);
  });
});

describe('the exposition', () => {
  it('spells a not-a-number sample NaN, as the text format does, where prom-client writes Nan', () => {
    const written = [
      '# HELP x Ends in Nan',
      '# TYPE nodejs_eventloop_lag_mean_seconds gauge',
      'nodejs_eventloop_lag_mean_seconds Nan',
      'x{a="b Nan"} 1',
      'y 2',
    ].join('\n');
    expect(spellNaN(written).split('\n')).toEqual([
      '# HELP x Ends in Nan',
      '# TYPE nodejs_eventloop_lag_mean_seconds gauge',
      'nodejs_eventloop_lag_mean_seconds NaN',
      'x{a="b Nan"} 1',
      'y 2',
    ]);
  });

  it('has no Nan in scrapes that follow each other at once', async () => {
    for (let i = 0; i < 5; i++) {
      const texts = await Promise.all([1, 2].map(async () => (await fetch(`${base}/metrics`)).text()));
      for (const text of texts) expect(text).not.toMatch(/ Nan$/m);
    }
  });
});
