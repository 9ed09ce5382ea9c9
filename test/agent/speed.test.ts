/**
 * The host-speed benchmark (src/agent/speed.ts): scores rounded to two significant figures, both
 * positive, the all-core score at least the single one, and the time it takes bounded by its budget.
 * No figure of this machine is asserted: a loaded machine must not fail a test.
 */
import { describe, expect, it } from 'vitest';
import { measureSpeed, roundScore } from '../../src/agent/speed.js';
import { metadataInput, type Facts } from '../../src/agent/facts.js';

describe('roundScore', () => {
  it.each([
    [0, 1],
    [Number.NaN, 1],
    [Infinity, 1],
    [7.4, 7],
    [42.6, 43],
    [1234, 1200],
    [1250, 1300],
    [98_765, 99_000],
    [99_500, 100_000],
  ])('%s → %s', (raw, rounded) => {
    expect(roundScore(raw)).toBe(rounded);
  });
});

describe('measureSpeed', () => {
  it('on one thread and on two: whole scores of two significant figures, the all-core one at least the single one', async () => {
    const started = performance.now();
    const one = await measureSpeed({ budgetMs: 60, threads: 1 });
    const two = await measureSpeed({ budgetMs: 60, threads: 2 });
    expect(one.threads).toBe(1);
    expect(one.all).toBe(one.single);
    expect(two.threads).toBe(2);
    for (const s of [one.single, two.single, two.all]) {
      expect(Number.isSafeInteger(s)).toBe(true);
      expect(s).toBeGreaterThan(0);
      expect(roundScore(s)).toBe(s);
    }
    expect(two.all).toBeGreaterThanOrEqual(two.single);
    // Two runs of 60 ms each, worker threads started once: far less than a few seconds.
    expect(performance.now() - started).toBeLessThan(20_000);
  });

  it('the scores go into the metadata the agent reports, and are left out when not measured', () => {
    const facts: Facts = {
      architectures: ['amd64'],
      cpuCount: 4,
      totalPhysicalMemory: 2 ** 33,
      diskFree: null,
      executors: [],
      tools: [],
    };
    expect(metadataInput({ ...facts, speed: { single: 3800, all: 7300, threads: 4 } }, [], [])).toMatchObject({
      cpuSpeed: 3800,
      cpuSpeedAll: 7300,
    });
    const none = metadataInput({ ...facts, speed: null }, [], []);
    expect('cpuSpeed' in none || 'cpuSpeedAll' in none).toBe(false);
  });
});
