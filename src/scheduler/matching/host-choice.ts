/**
 * What a worker that shares its resources takes next (docs/reference/resources.md), pure: given what it
 * offers, the work it holds, its reservation and the pending requests it may run in queue order, which
 * of those it may take now, and what becomes of its reservation. The rules are those of
 * rules/resources.ts: a request is taken when it fits in what the worker has free (fitsResources). The
 * worker is held for the first request in queue order that fits what it offers but not what it has free
 * (reservedStart), unless that request holds another worker already: the request it is held for moves up
 * the queue with it, so a large request is never passed by the small ones behind it. Work ahead of
 * that request in the queue is taken when it fits; work behind it only when it does not delay it
 * (mayBackfill). A reservation lapses after `maxSeconds` (reservationExpired), and that request does not
 * reserve this worker again while the lapsed row is kept. The storage (scheduler/storage/host-pull.ts) reads the inputs under the worker's
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
  // The stored reservation: gone with its request, lapsed after its longest hold, or still in force.
  const stored = input.reservation;
  let change: ReservationChange = { kind: 'keep', startsAt: null };
  let inForce: number | null = null;
  if (stored) {
    if (stored.request === null) change = { kind: 'clear' };
    else if (!stored.lapsed && reservationExpired(stored.reservedAt, now, input.maxSeconds)) change = { kind: 'lapse' };
    else if (!stored.lapsed) inForce = stored.workRequestId;
  }
  const lapsedHere = stored && (stored.lapsed || change.kind === 'lapse') ? stored.workRequestId : null;
  // The request the worker is held for: the first in queue order that does not fit now but fits what it
  // offers, and may hold it (the one it is held for already, or one that holds no other worker and did
  // not lapse here).
  let held: { workRequestId: number; request: Resources; startsAt: Date } | null = null;
  let heldAt = -1;
  input.candidates.forEach((c, i) => {
    if (held || fitsResources(c.reserved, free)) return;
    if (c.id !== inForce && (c.reservedElsewhere || c.id === lapsedHere)) return;
    const startsAt = reservedStart(offered, running, c.reserved, now);
    if (startsAt === null) return; // larger than the worker: it never fits here
    held = { workRequestId: c.id, request: c.reserved, startsAt };
    heldAt = i;
  });
  const h = held as { workRequestId: number; request: Resources; startsAt: Date } | null;
  if (h)
    change =
      h.workRequestId === inForce
        ? { kind: 'keep', startsAt: h.startsAt }
        : { kind: 'reserve', workRequestId: h.workRequestId, startsAt: h.startsAt };
  else if (inForce !== null && !input.candidates.some((c) => c.id === inForce)) change = { kind: 'clear' };
  // What it takes: what fits, ahead of the held request in the queue; behind it, only what does not delay it.
  const take = input.candidates
    .filter(
      (c, i) =>
        fitsResources(c.reserved, free) &&
        (!h ||
          i < heldAt ||
          mayBackfill(c, { request: h.request, startsAt: h.startsAt }, offered, running, now, input.safetyFactor)),
    )
    .map((c) => c.id);
  return {
    take,
    reservation: change,
    heldFor: h ? { workRequestId: h.workRequestId, startsAt: h.startsAt } : null,
  };
}
