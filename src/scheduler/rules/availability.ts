/**
 * "May this worker get work?" (docs/design.md: workers), in its one home: the TypeScript predicate
 * (unavailableReason, with the reason as data), the SQL fragment that says the same in a WHERE
 * clause (availableSql), and the facts both read, in one list (AVAILABILITY_FACTS) from which the rest
 * is made: the facts' type, the columns a query selects (availabilityColumns) and their mapping to the
 * facts (factsOfRow, factsOfWorker), the worker snapshot's packing (scheduler/storage/worker-snapshot.ts)
 * and the columns PostgreSQL copies to worker_state (test/scheduler/worker-state-columns.test.ts checks
 * its trigger against the list). The worker status shown in the API is derived from the reason
 * here (workerStatus). Which quarantined workers may be given a quarantine probe, and nothing else, is
 * here too (mayBeProbed, probeableSql). test/scheduler/availability.test.ts checks that the SQL and
 * the TypeScript agree on generated facts. Capacity (a free slot) is not part of it: it is counted against the
 * database where a worker is matched.
 *
 * The rule has no exception for the built-in server workers (loops/server-tasks/server-workers.ts): they report
 * their metadata as an agent does, at start and on every tick, so a process that runs keeps them fresh,
 * and one that died without saying so stops getting work by the same rule as a silent agent.
 */

/**
 * How a fact comes from its worker column: `text` and `flag` as the column is, `set` whether the time
 * in it is not null, `ms` the time in it as epoch milliseconds (fractions kept: PostgreSQL has
 * microseconds), null when there is none.
 */
export type AvailabilityFactKind = 'text' | 'flag' | 'set' | 'ms';

/**
 * The worker facts availability depends on, in their one list: each fact's name (in
 * AvailabilityFacts), the worker column it comes from and that column's property in the entity, its
 * name in a row read with availabilityColumns, and how the column gives it.
 */
export const AVAILABILITY_FACTS = [
  { fact: 'type', column: 'type', property: 'type', row: 'type', kind: 'text' },
  { fact: 'enabled', column: 'enabled', property: 'enabled', row: 'enabled', kind: 'flag' },
  { fact: 'draining', column: 'draining', property: 'draining', row: 'draining', kind: 'flag' },
  { fact: 'shuttingDown', column: 'shutting_down', property: 'shuttingDown', row: 'shutting_down', kind: 'flag' },
  { fact: 'terminated', column: 'terminated_at', property: 'terminatedAt', row: 'terminated', kind: 'set' },
  { fact: 'connected', column: 'connected_at', property: 'connectedAt', row: 'connected', kind: 'set' },
  // When it last reported its metadata; a heartbeat or a pull does not count (docs/design.md: workers).
  {
    fact: 'reportedMs',
    column: 'metadata_reported_at',
    property: 'metadataReportedAt',
    row: 'reported_ms',
    kind: 'ms',
  },
  { fact: 'quarantined', column: 'quarantined_at', property: 'quarantinedAt', row: 'quarantined', kind: 'set' },
] as const satisfies readonly {
  fact: string;
  column: string;
  property: string;
  row: string;
  kind: AvailabilityFactKind;
}[];

/** One entry of {@link AVAILABILITY_FACTS}. */
export type AvailabilityFact = (typeof AVAILABILITY_FACTS)[number];

/** The value a fact of this kind has. */
type ValueOf<K extends AvailabilityFactKind> = K extends 'text' ? string : K extends 'ms' ? number | null : boolean;

/** The worker facts availability depends on, one per entry of {@link AVAILABILITY_FACTS}. */
export type AvailabilityFacts = { readonly [F in AvailabilityFact as F['fact']]: ValueOf<F['kind']> };

/** The worker columns the facts come from, in the list's order. */
export const AVAILABILITY_WORKER_COLUMNS: readonly string[] = AVAILABILITY_FACTS.map((f) => f.column);

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
export const availableSql = (alias: string) =>
  `(${alias}.quarantined_at is null and ${availableButForQuarantineSql(alias)})`;

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
export const probeableSql = (alias: string) =>
  `(${alias}.quarantined_at is not null and ${availableButForQuarantineSql(alias)})`;

/** The parameter of availableSql: the oldest report that is still fresh. */
export const availableParams = (now: Date, freshMs: number): unknown[] => [new Date(now.getTime() - freshMs)];

/** A time column as epoch milliseconds, in SQL (as a fact of kind `ms` is read, and worker_state keeps it). */
export const epochMsSql = (column: string) => `(extract(epoch from ${column}) * 1000)::float8`;

/** How one fact is selected from the worker table under `alias`. */
function factColumnSql(f: AvailabilityFact, alias: string): string {
  const column = `${alias}.${f.column}`;
  switch (f.kind) {
    case 'text':
    case 'flag':
      return f.row === f.column ? column : `${column} as ${f.row}`;
    case 'set':
      return `${column} is not null as ${f.row}`;
    case 'ms':
      return `${epochMsSql(column)} as ${f.row}`;
  }
}

/** The columns factsOfRow reads, from the worker table under `alias`. */
export const availabilityColumns = (alias: string) => AVAILABILITY_FACTS.map((f) => factColumnSql(f, alias)).join(', ');

/** A row with the availability columns: each fact under its `row` name. */
export type AvailabilityRow = { readonly [F in AvailabilityFact as F['row']]: ValueOf<F['kind']> };

/** The facts of a row read with availabilityColumns. */
export const factsOfRow = (r: AvailabilityRow): AvailabilityFacts =>
  Object.fromEntries(AVAILABILITY_FACTS.map((f) => [f.fact, r[f.row]])) as AvailabilityFacts;

/** A loaded worker entity as factsOfWorker reads it: the facts' properties (its times may be left unloaded). */
export type AvailabilityOfWorker = {
  readonly [F in AvailabilityFact as F['kind'] extends 'text' | 'flag' ? F['property'] : never]: ValueOf<F['kind']>;
} & {
  readonly [F in AvailabilityFact as F['kind'] extends 'set' | 'ms' ? F['property'] : never]?: Date | null;
};

/** A fact from its property of a loaded worker entity. */
function factOfProperty(f: AvailabilityFact, value: unknown): unknown {
  switch (f.kind) {
    case 'text':
    case 'flag':
      return value;
    case 'set':
      return value != null;
    case 'ms':
      return value ? (value as Date).getTime() : null;
  }
}

/** The facts of a loaded worker entity (the API's objects). */
export const factsOfWorker = (w: AvailabilityOfWorker): AvailabilityFacts =>
  Object.fromEntries(
    AVAILABILITY_FACTS.map((f) => [f.fact, factOfProperty(f, (w as Record<string, unknown>)[f.property])]),
  ) as AvailabilityFacts;

/** What a worker is doing, as the API and the status page show it. */
export const WORKER_STATUSES = [
  'IDLE',
  'BUSY',
  'DRAINING',
  'DISCONNECTED',
  'STALE',
  'QUARANTINED',
  'DISABLED',
  'INACTIVE',
] as const;
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
