import { getMetricsFromIterator, type PromMetrics } from 'prom2javascript';
import { expect } from 'vitest';

/**
 * A /metrics answer parsed. The exposition must spell a not-a-number sample `NaN`, as the text format
 * does (checked here on every scrape); prom2javascript reads no NaN at all, so those samples (the
 * event-loop lag gauges of a scrape that follows another closely) are left out of what it parses.
 */
export async function parseMetrics(text: string): Promise<PromMetrics> {
  expect(text, 'a NaN sample spelt as prom-client does').not.toMatch(/ Nan$/m);
  const lines = text.split('\n').filter((line) => !/^[^#].* NaN$/.test(line));
  return getMetricsFromIterator(lines[Symbol.iterator]());
}
