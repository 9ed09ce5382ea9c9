/**
 * What a worker that shares its resources takes next (docs/reference/resources.md), pure: given what it
 * offers, the work it holds, its reservation and the pending requests it may run in queue order, which
 * of those it may take now, and what becomes of its reservation. The rules are those of
 * rules/resources.ts: a request is taken when it fits in what the worker has free (fitsResources); while
 * the worker is reserved for a request, another is taken only when it would not delay that one
 * (mayBackfill); the first request in queue order that fits what the worker offers but not what it has
 * free reserves it, unless that request holds another worker already; a reservation lapses after
 * `maxSeconds` (reservationExpired), and that request does not reserve this worker again while the
 * lapsed row is kept. The storage (scheduler/storage/host-pull.ts) reads the inputs under the worker's
 * lock and writes the answer.
 */
import {
  fitsResources,
  freeResources,
  mayBackfill,
  reservationExpired,
  reservedStart,
  type Resources,
  type RunningWork,
} from '../rules/resources.js';

/** A pending request the worker may run, in queue order. */
export interface HostCandidate {
  readonly id: number;
  readonly reserved: Resources;
  /** Its task's expected run in seconds; null when its task has no history. */
  readonly expectedSeconds: number | null;
  /** It holds another worker's reservation (not lapsed). */
  readonly reservedElsewhere: boolean;
}

/** The worker's reservation as stored. */
export interface StoredReservation {
  readonly workRequestId: number;
  readonly reservedAt: Date;
  readonly lapsed: boolean;
  /** What its request reserves while it is PENDING; null once it is not (assigned elsewhere, aborted). */
  readonly request: Resources | null;
}

/** What the choice does with the worker's reservation. */
export type ReservationChange =
  | { readonly kind: 'keep'; readonly startsAt: Date | null }
  | { readonly kind: 'clear' }
  | { readonly kind: 'lapse' }
  | { readonly kind: 'reserve'; readonly workRequestId: number; readonly startsAt: Date };

/** The choice: the requests it may take now, best first, and the change to its reservation. */
export interface HostChoice {
  readonly take: number[];
  readonly reservation: ReservationChange;
  /** The request the worker is held for after the change, and when it is expected to fit; null when none. */
  readonly heldFor: { readonly workRequestId: number; readonly startsAt: Date } | null;
}

export interface HostChoiceInput {
  readonly offered: Resources;
  readonly running: readonly RunningWork[];
  readonly reservation: StoredReservation | null;
  readonly candidates: readonly HostCandidate[];
  readonly now: Date;
  readonly safetyFactor: number;
  readonly maxSeconds: number;
}

/** The choice of one worker, by the rules in this module's comment. */
export function chooseOnHost(input: HostChoiceInput): HostChoice {
  const { offered, running, now } = input;
  const free = freeResources(
    offered,
    running.map((w) => w.reserved),
  );
  const stored = input.reservation;
  let change: ReservationChange = { kind: 'keep', startsAt: null };
  let held: { workRequestId: number; request: Resources; startsAt: Date } | null = null;
  if (stored) {
    if (stored.request === null) change = { kind: 'clear' };
    else if (!stored.lapsed && reservationExpired(stored.reservedAt, now, input.maxSeconds)) change = { kind: 'lapse' };
    else if (!stored.lapsed) {
      const startsAt = reservedStart(offered, running, stored.request, now);
      if (startsAt === null) change = { kind: 'clear' }; // it no longer fits what the worker offers
      else {
        held = { workRequestId: stored.workRequestId, request: stored.request, startsAt };
        change = { kind: 'keep', startsAt };
      }
    }
  }
  const lapsedHere = stored && (stored.lapsed || change.kind === 'lapse') ? stored.workRequestId : null;
  const take: number[] = [];
  for (const c of input.candidates) {
    const fitsNow = fitsResources(c.reserved, free);
    if (held && c.id === held.workRequestId) {
      if (fitsNow) take.push(c.id);
      continue;
    }
    if (fitsNow) {
      if (
        !held ||
        mayBackfill(
          c,
          { request: held.request, startsAt: held.startsAt },
          offered,
          running,
          now,
          input.safetyFactor,
        )
      )
        take.push(c.id);
      continue;
    }
    if (held || c.reservedElsewhere || c.id === lapsedHere) continue;
    const startsAt = reservedStart(offered, running, c.reserved, now);
    if (startsAt === null) continue; // larger than the worker: it never fits here
    held = { workRequestId: c.id, request: c.reserved, startsAt };
    change = { kind: 'reserve', workRequestId: c.id, startsAt };
  }
  return {
    take,
    reservation: change,
    heldFor: held ? { workRequestId: held.workRequestId, startsAt: held.startsAt } : null,
  };
}
