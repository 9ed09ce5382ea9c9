/**
 * The pure parts of instance retirement (src/scheduler/rules/instance-retirement.ts), table-driven:
 * the request limit, the lifetime, the fingerprint of what an instance is made from, and the room a
 * rollout has. Their SQL forms are pinned in test/provisioner/retirement-cycle.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  outlived,
  reachedWorkRequestLimit,
  replacementRoom,
  templateFingerprint,
} from '../../../src/scheduler/rules/instance-retirement.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const ago = (s: number) => new Date(NOW.getTime() - s * 1000);

describe('instance retirement', () => {
  it.each([
    [0, 1, false],
    [1, 1, true],
    [2, 1, true],
    [4, 5, false],
    [5, 5, true],
    [100, null, false],
  ])('after %i assignments with a limit of %s: reached %s', (assigned, limit, reached) => {
    expect(reachedWorkRequestLimit(assigned, limit)).toBe(reached);
  });

  it.each([
    [ago(3599), 3600, false],
    [ago(3600), 3600, true],
    [ago(99_999), null, false],
    [null, 3600, false],
    [ago(-10), 60, false], // a clock ahead: not outlived
  ])('created %s with a lifetime of %s s: outlived %s', (created, lifetime, expected) => {
    expect(outlived(created, lifetime, NOW)).toBe(expected);
  });

  it('the fingerprint follows what an instance is made from, not the order of its keys or unset fields', () => {
    const a = templateFingerprint({
      providerType: 'hetzner',
      specifications: { image: 'sbuild-1', instanceType: 'cx22', location: null },
    });
    expect(
      templateFingerprint({ providerType: 'hetzner', specifications: { instanceType: 'cx22', image: 'sbuild-1' } }),
    ).toBe(a);
    expect(
      templateFingerprint({ providerType: 'hetzner', specifications: { instanceType: 'cx22', image: 'sbuild-2' } }),
    ).not.toBe(a);
    expect(
      templateFingerprint({ providerType: 'ec2', specifications: { instanceType: 'cx22', image: 'sbuild-1' } }),
    ).not.toBe(a);
    expect(
      templateFingerprint({ providerType: 'hetzner', specifications: { instanceType: 'cx32', image: 'sbuild-1' } }),
    ).not.toBe(a);
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    // An offering's price is for cost only: changing it replaces no machine; changing its type does.
    const offered = (pricePerHour: number | null, instanceType = 'cx22') =>
      templateFingerprint({
        providerType: 'hetzner',
        specifications: { image: 'sbuild-1', offerings: [{ instanceType, location: 'fsn1', pricePerHour }] },
      });
    expect(offered(0.01)).toBe(offered(0.02));
    expect(offered(0.01)).toBe(offered(null));
    expect(offered(0.01, 'cx32')).not.toBe(offered(0.01));
  });

  it.each([
    [1, 0, 0, 1],
    [1, 1, 0, 0], // one retiring already
    [1, 0, 1, 0], // its replacement still launching
    [3, 1, 1, 1],
    [2, 5, 0, 0],
  ])('at most %i at a time, %i retiring, %i launching: room for %i', (max, retiring, launching, room) => {
    expect(replacementRoom(max, retiring, launching)).toBe(room);
  });
});
