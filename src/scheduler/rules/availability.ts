/**
 * "May this worker get work?" (docs/design.md: workers), in its one home: the TypeScript predicate
 * (unavailableReason, with the reason as data), the SQL fragment that says the same in a WHERE
 * clause (availableSql), the columns both read (availabilityColumns) and the mapping from those
 * columns to the facts (factsOfRow). The worker status shown in the API is derived from the reason
 * here (workerStatus). Which quarantined workers may be given a quarantine probe, and nothing else, is
 * here too (mayBeProbed, probeableSql). test/scheduler/availability.test.ts checks that the SQL and
 * the TypeScript agree on generated facts. Capacity (a free slot) is not part of it: it is counted against the
 * database where a worker is matched.
 *
 * The rule has no exception for the built-in server workers (loops/server-tasks/server-workers.ts): they report
 * their metadata as an agent does, at start and on every tick, so a process that runs keeps them fresh,
 * and one that died without saying so stops getting work by the same rule as a silent agent.
 */

/** The worker facts availability depends on. Times as epoch milliseconds (fractions kept: PostgreSQL has microseconds). */
export interface AvailabilityFacts {
  readonly type: string;
  readonly enabled: boolean;
  readonly draining: boolean;
  readonly shuttingDown: boolean;
  readonly terminated: boolean;
  readonly connected: boolean;
  /** When it last reported its metadata; a heartbeat or a pull does not count (docs/design.md: workers). */
  readonly reportedMs: number | null;
  readonly quarantined: boolean;
}

/** Why a worker gets no new work now; null when it may (capacity aside). Reasons are data. */
export const UNAVAILABLE = {
  INACTIVE: 'INACTIVE',
  DISABLED: 'DISABLED',
  /** Its recent results are errors while the same tasks succeed elsewhere (quarantine.ts). */
  QUARANTINED: 'QUARANTINED',
  DISCONNECTED: 'DISCONNECTED',
  /** Connected, but it never reported its metadata, or not within the freshness setting. */
  STALE: 'STALE',
  DRAINING: 'DRAINING',
  SHUTTING_DOWN: 'SHUTTING_DOWN',
  NOT_ASSIGNABLE: 'NOT_ASSIGNABLE',
} as const;
export type UnavailableReason = (typeof UNAVAILABLE)[keyof typeof UNAVAILABLE];

/**
 * The first reason, in this order, that a worker may not get work now, or null. Not-assignable comes
 * last so that such a worker's status still says whether it is connected, disabled or draining.
 */
export function unavailableReason(w: AvailabilityFacts, now: Date, freshMs: number): UnavailableReason | null {
  if (w.terminated) return UNAVAILABLE.INACTIVE;
  if (!w.enabled) return UNAVAILABLE.DISABLED;
  if (w.quarantined) return UNAVAILABLE.QUARANTINED;
  if (!w.connected) return UNAVAILABLE.DISCONNECTED;
  if (w.reportedMs === null || w.reportedMs < now.getTime() - freshMs) return UNAVAILABLE.STALE;
  if (w.draining) return UNAVAILABLE.DRAINING;
  if (w.shuttingDown) return UNAVAILABLE.SHUTTING_DOWN;
  if (w.type === 'not-assignable') return UNAVAILABLE.NOT_ASSIGNABLE;
  return null;
}

/** Every condition of availableSql but the quarantine (one parameter, availableParams). */
const availableButForQuarantineSql = (alias: string) =>
  `(${alias}.terminated_at is null and ${alias}.enabled and ${alias}.connected_at is not null
    and ${alias}.metadata_reported_at is not null and ${alias}.metadata_reported_at >= ?::timestamptz and not ${alias}.draining and not ${alias}.shutting_down and ${alias}.type <> 'not-assignable')`;

/**
 * The same rule as a SQL condition on the worker table under `alias`, true exactly when
 * unavailableReason is null (false, never null: a missing time is spelled out). It takes one parameter, availableParams(now, freshMs), in its place.
 */
export const availableSql = (alias: string) => `(${alias}.quarantined_at is null and ${availableButForQuarantineSql(alias)})`;

/**
 * Whether a quarantined worker may be given a quarantine probe (services/work/quarantine-probes.ts): it is
 * quarantined and nothing else keeps it from work (enabled, connected, fresh, not draining). The probe
 * is the only work such a worker gets: unavailableReason still says QUARANTINED, so no matcher gives it
 * anything else.
 */
export function mayBeProbed(w: AvailabilityFacts, now: Date, freshMs: number): boolean {
  return w.quarantined && unavailableReason({ ...w, quarantined: false }, now, freshMs) === null;
}

/** mayBeProbed as a SQL condition on the worker table under `alias` (one parameter, availableParams, in its place). */
export const probeableSql = (alias: string) => `(${alias}.quarantined_at is not null and ${availableButForQuarantineSql(alias)})`;

/** The parameter of availableSql: the oldest report that is still fresh. */
export const availableParams = (now: Date, freshMs: number): unknown[] => [new Date(now.getTime() - freshMs)];

/** The columns factsOfRow reads, from the worker table under `alias`. */
export const availabilityColumns = (alias: string) =>
  `${alias}.type, ${alias}.enabled, ${alias}.draining, ${alias}.shutting_down, ${alias}.terminated_at is not null as terminated,
   ${alias}.connected_at is not null as connected, (extract(epoch from ${alias}.metadata_reported_at) * 1000)::float8 as reported_ms,
   ${alias}.quarantined_at is not null as quarantined`;

/** A row with the availability columns. */
export interface AvailabilityRow {
  readonly type: string;
  readonly enabled: boolean;
  readonly draining: boolean;
  readonly shutting_down: boolean;
  readonly terminated: boolean;
  readonly connected: boolean;
  readonly reported_ms: number | null;
  readonly quarantined: boolean;
}

/** The facts of a row read with availabilityColumns. */
export const factsOfRow = (r: AvailabilityRow): AvailabilityFacts => ({
  type: r.type,
  enabled: r.enabled,
  draining: r.draining,
  shuttingDown: r.shutting_down,
  terminated: r.terminated,
  connected: r.connected,
  reportedMs: r.reported_ms,
  quarantined: r.quarantined,
});

/** The facts of a loaded worker entity (the API's objects). */
export const factsOfWorker = (w: {
  readonly type: string;
  readonly enabled: boolean;
  readonly draining: boolean;
  readonly shuttingDown: boolean;
  readonly terminatedAt?: Date | null;
  readonly connectedAt?: Date | null;
  readonly metadataReportedAt?: Date | null;
  readonly quarantinedAt?: Date | null;
}): AvailabilityFacts => ({
  type: w.type,
  enabled: w.enabled,
  draining: w.draining,
  shuttingDown: w.shuttingDown,
  terminated: w.terminatedAt != null,
  connected: w.connectedAt != null,
  reportedMs: w.metadataReportedAt ? w.metadataReportedAt.getTime() : null,
  quarantined: w.quarantinedAt != null,
});

/** What a worker is doing, as the API and the status page show it. */
export const WORKER_STATUSES = ['IDLE', 'BUSY', 'DRAINING', 'DISCONNECTED', 'STALE', 'QUARANTINED', 'DISABLED', 'INACTIVE'] as const;
export type WorkerStatus = (typeof WORKER_STATUSES)[number];

const STATUS_OF_REASON: Record<UnavailableReason, WorkerStatus | null> = {
  INACTIVE: 'INACTIVE',
  DISABLED: 'DISABLED',
  QUARANTINED: 'QUARANTINED',
  DISCONNECTED: 'DISCONNECTED',
  STALE: 'STALE',
  DRAINING: 'DRAINING',
  SHUTTING_DOWN: 'DRAINING',
  NOT_ASSIGNABLE: null, // it never gets work, but it may be running something: idle or busy
};

/** The status of a worker, from its availability and how many work requests it holds (ASSIGNED or RUNNING). */
export function workerStatus(facts: AvailabilityFacts, activeWork: number, now: Date, freshMs: number): WorkerStatus {
  const reason = unavailableReason(facts, now, freshMs);
  return (reason && STATUS_OF_REASON[reason]) ?? (activeWork > 0 ? 'BUSY' : 'IDLE');
}
