/** The worker facts availability depends on. */
export interface AvailabilityFacts {
  readonly type: string;
  readonly enabled: boolean;
  readonly draining: boolean;
  readonly shuttingDown: boolean;
  readonly terminatedAt: Date | string | null;
  readonly connectedAt: Date | string | null;
  readonly lastSeenAt: Date | string | null;
}

/** Why a worker gets no new work now; null when it may (capacity aside). Reasons are data. */
export const UNAVAILABLE = {
  NOT_ASSIGNABLE: 'NOT_ASSIGNABLE',
  INACTIVE: 'INACTIVE',
  DISABLED: 'DISABLED',
  DISCONNECTED: 'DISCONNECTED',
  STALE: 'STALE',
  DRAINING: 'DRAINING',
  SHUTTING_DOWN: 'SHUTTING_DOWN',
} as const;
export type UnavailableReason = (typeof UNAVAILABLE)[keyof typeof UNAVAILABLE];

/** DESIGN §2.2: connected, metadata fresh, enabled, not draining (the free slot is checked against the database). */
export function unavailableReason(w: AvailabilityFacts, now: Date, freshMs: number): UnavailableReason | null {
  if (w.type === 'not-assignable') return UNAVAILABLE.NOT_ASSIGNABLE;
  if (w.terminatedAt) return UNAVAILABLE.INACTIVE;
  if (!w.enabled) return UNAVAILABLE.DISABLED;
  if (!w.connectedAt) return UNAVAILABLE.DISCONNECTED;
  if (!w.lastSeenAt || now.getTime() - new Date(w.lastSeenAt).getTime() > freshMs) return UNAVAILABLE.STALE;
  if (w.draining) return UNAVAILABLE.DRAINING;
  if (w.shuttingDown) return UNAVAILABLE.SHUTTING_DOWN;
  return null;
}
