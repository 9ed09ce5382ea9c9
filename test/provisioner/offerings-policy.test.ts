/** The offerings rule (src/providers/offerings.ts), pure: order, marks and their expiry, all unavailable. */
import { describe, expect, it } from 'vitest';
import {
  describeOffering,
  launchChoice,
  marksFor,
  marksOffering,
  offeringKey,
  offeringsOf,
  offeringStates,
  type Offering,
} from '../../src/providers/offerings.js';
import { PROVIDER_ERROR_KINDS } from '../../src/providers/provider.js';

const NOW = new Date('2026-11-28T10:00:00Z');
const at = (seconds: number) => new Date(NOW.getTime() + seconds * 1000);
const A: Offering = { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'spot', maxPricePerHour: 0.05 };
const B: Offering = {
  instanceType: 'c6i.large',
  location: 'eu-central-1b',
  market: 'on-demand',
  maxPricePerHour: null,
};
const C: Offering = { instanceType: 'm6i.large', location: null, market: 'on-demand', maxPricePerHour: null };
const mark = (o: Offering, untilSeconds: number, reason = 'InsufficientInstanceCapacity') => ({
  key: offeringKey(o),
  until: at(untilSeconds),
  reason,
});

describe('offeringsOf', () => {
  it.each([
    [
      'the offerings list, in order',
      {
        offerings: [
          { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'spot', maxPricePerHour: 0.05 },
          { instanceType: 'm6i.large', market: 'on-demand' },
        ],
      },
      [A, C],
    ],
    [
      'one on-demand offering for a pool with instanceType and location',
      { instanceType: 'c6i.large', location: 'eu-central-1b' },
      [B],
    ],
    ['one on-demand offering anywhere for a pool with instanceType only', { instanceType: 'm6i.large' }, [C]],
    ['none for a pool without either (local, exec, qemu)', { cpuCount: 2 }, []],
    [
      'on-demand when the market is left out, and no price for on-demand',
      { offerings: [{ instanceType: 'm6i.large', maxPricePerHour: 3 }] },
      [C],
    ],
  ])('%s', (_what, specifications, expected) => {
    expect(offeringsOf(specifications)).toEqual(expected);
  });
});

describe('keys and words', () => {
  it.each([
    [A, 'spot:c6i.large@eu-central-1a<=0.05', 'c6i.large in eu-central-1a (spot, at most 0.05/h)'],
    [B, 'on-demand:c6i.large@eu-central-1b', 'c6i.large in eu-central-1b (on-demand)'],
    [C, 'on-demand:m6i.large@*', 'm6i.large (on-demand)'],
  ])('%j', (o, key, words) => {
    expect(offeringKey(o)).toBe(key);
    expect(describeOffering(o)).toBe(words);
  });
});

describe('launchChoice', () => {
  it.each([
    ['no marks: every offering, in order', [], [A, B, C]],
    ['the first marked: the others, in order', [mark(A, 60)], [B, C]],
    ['a middle one marked: order kept', [mark(B, 60)], [A, C]],
    ['a mark that has expired is no mark', [mark(A, -1)], [A, B, C]],
    ['a mark that ends right now is no mark', [mark(A, 0)], [A, B, C]],
    [
      'a mark of an offering the pool no longer has changes nothing',
      [{ key: 'spot:x1.large@*', until: at(60), reason: 'x' }],
      [A, B, C],
    ],
    [
      'a mark of another price is another offering',
      [{ key: 'spot:c6i.large@eu-central-1a<=0.09', until: at(60), reason: 'x' }],
      [A, B, C],
    ],
  ])('%s', (_what, marks, usable) => {
    expect(launchChoice([A, B, C], marks, NOW)).toEqual({ usable, failure: null, nextUsableAt: null });
  });

  it('all unavailable: the launch fails with a reason naming each, until when and why, and says when the first is back', () => {
    const choice = launchChoice(
      [A, B, C],
      [mark(A, 120, 'SpotMaxPriceTooLow'), mark(B, 60), mark(C, 180, 'VcpuLimitExceeded')],
      NOW,
    );
    expect(choice.usable).toEqual([]);
    expect(choice.failure).toBe(
      'every offering is unavailable: ' +
        'c6i.large in eu-central-1a (spot, at most 0.05/h) until 2026-11-28T10:02:00.000Z (SpotMaxPriceTooLow); ' +
        'c6i.large in eu-central-1b (on-demand) until 2026-11-28T10:01:00.000Z (InsufficientInstanceCapacity); ' +
        'm6i.large (on-demand) until 2026-11-28T10:03:00.000Z (VcpuLimitExceeded)',
    );
    expect(choice.nextUsableAt).toEqual(at(60));
    // A moment after the first mark ends, that offering is usable again.
    expect(launchChoice([A, B, C], [mark(A, 120), mark(B, 60), mark(C, 180)], at(61)).usable).toEqual([B]);
  });

  it('a pool without offerings has nothing to choose and no failure', () => {
    expect(launchChoice([], [mark(A, 60)], NOW)).toEqual({ usable: [], failure: null, nextUsableAt: null });
  });
});

describe('offeringStates', () => {
  it('shows every offering in order with its mark while it holds', () => {
    expect(offeringStates([A, B], [mark(B, 30, 'resource_unavailable'), mark(A, -5)], NOW)).toEqual([
      { offering: A, key: offeringKey(A), unavailableUntil: null, unavailableReason: null },
      { offering: B, key: offeringKey(B), unavailableUntil: at(30), unavailableReason: 'resource_unavailable' },
    ]);
  });
});

describe('what marks an offering', () => {
  it.each(PROVIDER_ERROR_KINDS.map((k) => [k, k === 'capacity' || k === 'quota']))('%s marks: %s', (kind, marks) => {
    expect(marksOffering(kind as (typeof PROVIDER_ERROR_KINDS)[number])).toBe(marks);
  });

  it('marks the capacity and quota failures for the setting, not the others', () => {
    const failures = [
      {
        key: offeringKey(A),
        kind: 'capacity' as const,
        code: 'InsufficientInstanceCapacity',
        reason: 'no room (InsufficientInstanceCapacity)',
      },
      { key: offeringKey(B), kind: 'quota' as const, code: 'VcpuLimitExceeded', reason: 'limit (VcpuLimitExceeded)' },
      { key: offeringKey(C), kind: 'invalid' as const, code: 'InvalidParameterValue', reason: 'bad' },
    ];
    expect(marksFor(failures, NOW, 180_000)).toEqual([
      { key: offeringKey(A), until: at(180), reason: 'no room (InsufficientInstanceCapacity)' },
      { key: offeringKey(B), until: at(180), reason: 'limit (VcpuLimitExceeded)' },
    ]);
  });
});
