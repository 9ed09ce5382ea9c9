/**
 * After a spot interruption the pool's spot offerings are set aside for a while, so that the
 * replacement launches on-demand (src/providers/offerings.ts: interruptionMarks); a pool
 * with spot offerings only keeps them, since it has nothing else to launch.
 */
import { describe, expect, it } from 'vitest';
import {
  INTERRUPTED_REASON,
  interruptionMarks,
  launchChoice,
  offeringKey,
  type Offering,
} from '../../src/providers/offerings.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const spotA: Offering = { instanceType: 'c6i.large', location: 'eu-central-1a', market: 'spot', maxPricePerHour: 0.05 };
const spotB: Offering = { instanceType: 'c6a.large', location: 'eu-central-1b', market: 'spot', maxPricePerHour: null };
const onDemand: Offering = {
  instanceType: 'c6i.large',
  location: 'eu-central-1a',
  market: 'on-demand',
  maxPricePerHour: null,
};

describe('offerings after an interruption', () => {
  it('marks every spot offering when there is an on-demand one: the next launch tries on-demand first', () => {
    const marks = interruptionMarks([spotA, spotB, onDemand], NOW, 180_000);
    expect(marks).toEqual([
      { key: offeringKey(spotA), until: new Date(NOW.getTime() + 180_000), reason: INTERRUPTED_REASON },
      { key: offeringKey(spotB), until: new Date(NOW.getTime() + 180_000), reason: INTERRUPTED_REASON },
    ]);
    expect(launchChoice([spotA, spotB, onDemand], marks, NOW).usable).toEqual([onDemand]);
    // Once the marks expire, spot comes first again.
    expect(launchChoice([spotA, spotB, onDemand], marks, new Date(NOW.getTime() + 180_001)).usable).toEqual([
      spotA,
      spotB,
      onDemand,
    ]);
  });

  it('marks nothing for a pool of spot offerings alone, nor for one of on-demand alone', () => {
    expect(interruptionMarks([spotA, spotB], NOW, 180_000)).toEqual([]);
    expect(interruptionMarks([onDemand], NOW, 180_000)).toEqual([]);
    expect(interruptionMarks([], NOW, 180_000)).toEqual([]);
  });
});
