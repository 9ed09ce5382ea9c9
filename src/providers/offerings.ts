/**
 * Offerings with fallback (docs/operating/pools.md, "Offerings with fallback"): the one home of the rule that says
 * which of a pool's offerings a launch may use now and in which order. An offering is an instance type
 * in a location (an EC2 availability zone, a Hetzner location), on-demand or spot. A launch tries the
 * usable ones in the pool's order; one that fails for capacity or quota is marked unavailable for a
 * while (TAGSCHED_OFFERING_UNAVAILABLE_SECONDS) and the next is tried. Pure: the marks are read and
 * written by services/pools/offering-marks.ts, the providers try what this module hands them.
 */
import {
  OFFERING_MARKETS,
  type Offering,
  type OfferingFailure,
  type OfferingMarket,
  type ProviderErrorKind,
} from './provider.js';

export { OFFERING_MARKETS, type Offering, type OfferingFailure, type OfferingMarket };

/** At most this many offerings per pool (pool-specifications.ts refuses more; list-bounds.ts counts it). */
export const MAX_OFFERINGS = 20;

/** An offering's identity in the marks table: market, type, location and maximum price (a new maximum is a new offering; its pricePerHour is not part of it). */
export function offeringKey(o: Offering): string {
  return `${o.market}:${o.instanceType}@${o.location ?? '*'}${o.maxPricePerHour === null ? '' : `<=${o.maxPricePerHour}`}`;
}

/** An offering in words, for messages and pages: `c6i.large in eu-central-1a (spot, at most 0.05/h)`. */
export function describeOffering(o: Offering): string {
  const where = o.location ? ` in ${o.location}` : '';
  const price = o.maxPricePerHour === null ? '' : `, at most ${o.maxPricePerHour}/h`;
  return `${o.instanceType}${where} (${o.market}${price})`;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v ? v : null);

/**
 * A pool's offerings, in order, from its (already checked) specifications: its `offerings` list, or,
 * for a pool that names only `instanceType` (and `location`), that one offering, on-demand. None for
 * a pool that names neither (local, exec, qemu).
 */
export function offeringsOf(specifications: Readonly<Record<string, unknown>>): Offering[] {
  const list = specifications.offerings;
  if (Array.isArray(list) && list.length) {
    return list.flatMap((raw) => {
      const o = (raw ?? {}) as Record<string, unknown>;
      const instanceType = str(o.instanceType);
      if (!instanceType) return [];
      const market: OfferingMarket = o.market === 'spot' ? 'spot' : 'on-demand';
      const price = typeof o.maxPricePerHour === 'number' && market === 'spot' ? o.maxPricePerHour : null;
      const pricePerHour = typeof o.pricePerHour === 'number' ? o.pricePerHour : null;
      return [
        {
          instanceType,
          location: str(o.location),
          market,
          maxPricePerHour: price,
          ...(pricePerHour === null ? {} : { pricePerHour }),
        },
      ];
    });
  }
  const instanceType = str(specifications.instanceType);
  return instanceType
    ? [{ instanceType, location: str(specifications.location), market: 'on-demand', maxPricePerHour: null }]
    : [];
}

/** An offering marked unavailable: until when, and the provider's reason. */
export interface OfferingMark {
  readonly key: string;
  readonly until: Date;
  readonly reason: string;
}

/** An offering with what the marks say of it now. */
export interface OfferingState {
  readonly offering: Offering;
  readonly key: string;
  /** Null when it is usable now. */
  readonly unavailableUntil: Date | null;
  readonly unavailableReason: string | null;
}

/** Every offering of the pool, in order, each with its mark if the mark still holds at `now` (an expired mark is no mark). */
export function offeringStates(
  offerings: readonly Offering[],
  marks: readonly OfferingMark[],
  now: Date,
): OfferingState[] {
  const byKey = new Map(marks.map((m) => [m.key, m]));
  return offerings.map((offering) => {
    const key = offeringKey(offering);
    const mark = byKey.get(key);
    const holds = mark !== undefined && mark.until.getTime() > now.getTime();
    return {
      offering,
      key,
      unavailableUntil: holds ? mark.until : null,
      unavailableReason: holds ? mark.reason : null,
    };
  });
}

/**
 * What a launch may try now: the usable offerings in the pool's order. When the pool has offerings
 * and none is usable, `failure` says so, naming each with until when and why; a pool without
 * offerings (local, exec, qemu) has nothing to choose and no failure.
 */
export function launchChoice(
  offerings: readonly Offering[],
  marks: readonly OfferingMark[],
  now: Date,
): { usable: Offering[]; failure: string | null; nextUsableAt: Date | null } {
  const states = offeringStates(offerings, marks, now);
  const usable = states.filter((s) => s.unavailableUntil === null).map((s) => s.offering);
  if (usable.length || !states.length) return { usable, failure: null, nextUsableAt: null };
  const named = states.map(
    (s) => `${describeOffering(s.offering)} until ${s.unavailableUntil!.toISOString()} (${s.unavailableReason})`,
  );
  const nextUsableAt = new Date(Math.min(...states.map((s) => s.unavailableUntil!.getTime())));
  return { usable, failure: `every offering is unavailable: ${named.join('; ')}`, nextUsableAt };
}

/** Provider error kinds that mark the offering that met them: the cloud has no room or no quota for it (another offering may). */
export function marksOffering(kind: ProviderErrorKind): boolean {
  return kind === 'capacity' || kind === 'quota';
}

/** Why a pool's spot offerings are set aside after one of its spot instances was interrupted. */
export const INTERRUPTED_REASON = 'a spot instance of this pool was interrupted: on-demand first for a while';

/**
 * After a spot interruption, the work re-queued from it should not meet another: the pool's spot
 * offerings are marked for `unavailableMs`, so that its replacement launches on-demand. Only when the
 * pool has an on-demand offering to fall back to: a pool of spot offerings alone keeps them.
 */
export function interruptionMarks(offerings: readonly Offering[], now: Date, unavailableMs: number): OfferingMark[] {
  if (!offerings.some((o) => o.market === 'on-demand')) return [];
  const until = new Date(now.getTime() + unavailableMs);
  return offerings
    .filter((o) => o.market === 'spot')
    .map((o) => ({ key: offeringKey(o), until, reason: INTERRUPTED_REASON }));
}

/** The marks to record for failures met at `now`: each marking failure holds its offering for `unavailableMs`. */
export function marksFor(failures: readonly OfferingFailure[], now: Date, unavailableMs: number): OfferingMark[] {
  return failures
    .filter((f) => marksOffering(f.kind))
    .map((f) => ({ key: f.key, until: new Date(now.getTime() + unavailableMs), reason: f.reason }));
}
