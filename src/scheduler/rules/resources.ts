/**
 * Shared resources, the rule's one home: a worker offers CPUs, memory and disk rather than identical
 * slots, each request reserves some of them while it is active work (ASSIGNED or RUNNING,
 * rules/active-work.ts), and a request fits a worker when every figure it reserves is at most what the
 * worker has free (its offer less what its active work reserves, never below 0). In two forms: the
 * TypeScript predicates (freeResources, fitsResources, and overCommittedBy for a batch of assignments)
 * and their SQL fragments (freeResourcesSql, fitsResourcesSql, overCommittedBySql) on the columns that {@link RESOURCE_COLUMNS} names; test/scheduler/rules/resources.test.ts
 * checks that the two forms agree on generated workers and requests of every status. Beside them, the
 * words of a shortfall (resourceShortfalls, describeShortfall) and of figures (describeResources,
 * describeReservation), whether a host is a candidate (hostCandidate) and, pure, the reservation of a host
 * for a large request and the backfill of smaller work around it (reservedStart, mayBackfill,
 * reservationExpired).
 *
 * It applies to the workers whose `offers_resources` is set: their pulls, placements and passes go through
 * storage/host-pull.ts and, for the pass, storage/host-pass.ts (the choice: matching/host-choice.ts), and the diagnosis names their shortfalls;
 * workers with fixed slots count slots (rules/active-work.ts). The candidates keep a host only where a
 * request fits it (matching/candidates.ts), and demand packs requests onto the machines of pools that share their
 * resources (matching/resource-packing.ts). A request that reserves nothing (NO_RESOURCES) fits any
 * worker, and a worker that offers nothing takes only such requests.
 */
import { RESOURCE_FIGURES, type ResourceFigure, type Resources } from '../../core/tasks/resource-request.js';
import { isActiveSql } from './active-work.js';

export type { Resources } from '../../core/tasks/resource-request.js';
export { NO_RESOURCES } from '../../core/tasks/resource-request.js';

const FIGURES = RESOURCE_FIGURES;
type Figure = ResourceFigure;

/** The largest figure a column holds (int4). */
const MAX_FIGURE = 2 ** 31 - 1;

/** A figure of untrusted metadata, when it is one: a finite number from 0, floored, at most MAX_FIGURE. */
const figureOf = (value: unknown, scale: number): number | null =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0
    ? Math.min(MAX_FIGURE, Math.floor(value / scale))
    : null;

const BYTES_PER_MIB = 1024 * 1024;

/**
 * What a worker that shares its resources offers, figure by figure from the first that gives it: its
 * static (admin) metadata, its agent's report, its pool's instance size (`cpuCount`, `memoryGib`,
 * `diskGib`); 0 when none does. CPUs from `system:cpu_count`, memory from `system:total_physical_memory`,
 * disk from `system:disk_free` (bytes, in whole MiB). The disk figure is the free disk its agent last
 * reported, so it is best reported when the worker is idle (the agent reports at its start).
 */
export function offeredResources(
  staticMetadata: Readonly<Record<string, unknown>>,
  dynamicMetadata: Readonly<Record<string, unknown>>,
  pool: { readonly cpuCount?: unknown; readonly memoryGib?: unknown; readonly diskGib?: unknown } | null,
): Resources {
  const first = (key: string, scale: number, poolValue: unknown, poolScale: number) =>
    figureOf(staticMetadata[key], scale) ??
    figureOf(dynamicMetadata[key], scale) ??
    figureOf(typeof poolValue === 'number' ? poolValue * poolScale : null, 1) ??
    0;
  return {
    cpus: first('system:cpu_count', 1, pool?.cpuCount, 1),
    memoryMib: first('system:total_physical_memory', BYTES_PER_MIB, pool?.memoryGib, 1024),
    diskMib: first('system:disk_free', BYTES_PER_MIB, pool?.diskGib, 1024),
  };
}

/**
 * The columns the SQL form reads and the ones it gives, per figure: on the worker table what it offers,
 * on the work_request table what a request reserves, and the columns of the relation of
 * {@link freeResourcesSql}.
 */
export const RESOURCE_COLUMNS = {
  worker: { cpus: 'offered_cpus', memoryMib: 'offered_memory_mib', diskMib: 'offered_disk_mib' },
  workRequest: { cpus: 'reserved_cpus', memoryMib: 'reserved_memory_mib', diskMib: 'reserved_disk_mib' },
  free: { cpus: 'free_cpus', memoryMib: 'free_memory_mib', diskMib: 'free_disk_mib' },
} as const satisfies Record<string, Record<Figure, string>>;

// The three functions below spell the figures out rather than loop over FIGURES: the pass calls them for
// every candidate of every pull (matching/host-choice.ts), and the loops' closures cost more than the sums.

/** The figure-by-figure sum of some reservations. */
const sum = (all: readonly Resources[]): Resources => {
  let cpus = 0;
  let memoryMib = 0;
  let diskMib = 0;
  for (const r of all) {
    cpus += r.cpus;
    memoryMib += r.memoryMib;
    diskMib += r.diskMib;
  }
  return { cpus, memoryMib, diskMib };
};

/** What a worker has free: what it offers less the sum of what its active work reserves, each figure never below 0. */
export const freeResources = (offered: Resources, reserved: readonly Resources[]): Resources => {
  const used = sum(reserved);
  return {
    cpus: Math.max(0, offered.cpus - used.cpus),
    memoryMib: Math.max(0, offered.memoryMib - used.memoryMib),
    diskMib: Math.max(0, offered.diskMib - used.diskMib),
  };
};

/** Whether a request fits: every figure it reserves is at most the free one. */
export const fitsResources = (request: Resources, free: Resources): boolean =>
  request.cpus <= free.cpus && request.memoryMib <= free.memoryMib && request.diskMib <= free.diskMib;

/** The name of a figure in a shortfall. */
export type ResourceName = 'cpus' | 'memory' | 'disk';

const NAMES: Record<Figure, ResourceName> = { cpus: 'cpus', memoryMib: 'memory', diskMib: 'disk' };

/** One figure of a request that does not fit: what it needs, what the worker has free and what it offers (CPUs, or MiB). */
export interface ResourceShortfall {
  readonly resource: ResourceName;
  readonly needs: number;
  readonly free: number;
  readonly offered: number;
}

/** The figures of `request` that do not fit in `free` (cpus, memory, disk, in that order); none when it fits. */
export const resourceShortfalls = (request: Resources, free: Resources, offered: Resources): ResourceShortfall[] =>
  FIGURES.filter((f) => request[f] > free[f]).map((f) => ({
    resource: NAMES[f],
    needs: request[f],
    free: free[f],
    offered: offered[f],
  }));

/**
 * MiB in GiB with at most one decimal, a trailing `.0` dropped. A need is rounded up to the tenth and
 * what a worker has down, so that the words never make a shortfall look like a fit (16,384 MiB needed
 * with 16,383 free reads `16` and `15.9`). Exact: tenths of a GiB are MiB × 10 / 1024, a division by a
 * power of two.
 */
const gib = (mib: number, round: (tenths: number) => number): string => String(round((mib * 10) / 1024) / 10);

/**
 * The diagnosis's words for one shortfall on the worker `workerName`:
 * `needs 4 CPUs; build-7 has 2 free of 8`, `needs 16 GiB of memory; build-7 has 6 GiB free of 64`.
 */
export const describeShortfall = (workerName: string, s: ResourceShortfall): string => {
  if (s.resource === 'cpus')
    return `needs ${s.needs} ${s.needs === 1 ? 'CPU' : 'CPUs'}; ${workerName} has ${s.free} free of ${s.offered}`;
  return (
    `needs ${gib(s.needs, Math.ceil)} GiB of ${s.resource}; ` +
    `${workerName} has ${gib(s.free, Math.floor)} GiB free of ${gib(s.offered, Math.floor)}`
  );
};

/**
 * Whether a worker that shares its resources is a candidate for a request: the request fits in what it
 * offers (ever), and, when only workers that could take it now count (`availableOnly`), in what it has
 * free now. A worker with slots is not judged here (it has no `host`).
 */
export const hostCandidate = (
  request: Resources,
  host: { readonly offered: Resources; readonly free: Resources },
  availableOnly: boolean,
): boolean => fitsResources(request, host.offered) && (!availableOnly || fitsResources(request, host.free));

/** Some figures in words: `2 CPUs, 12 GiB memory, 1 GiB disk` (GiB rounded to the tenth). */
export const describeResources = (r: Resources): string =>
  `${r.cpus} ${r.cpus === 1 ? 'CPU' : 'CPUs'}, ${gib(r.memoryMib, Math.round)} GiB memory, ${gib(r.diskMib, Math.round)} GiB disk`;

/**
 * A request's reservation in words, each figure with where it came from (`work show`, the request's page):
 * `2 CPUs (user), 12 GiB memory (user), 1 GiB disk (task-default)`.
 */
export const describeReservation = (r: Resources, sources: { readonly [F in Figure]: string }): string =>
  `${r.cpus} ${r.cpus === 1 ? 'CPU' : 'CPUs'} (${sources.cpus}), ${gib(r.memoryMib, Math.round)} GiB memory (${sources.memoryMib}), ${gib(r.diskMib, Math.round)} GiB disk (${sources.diskMib})`;

/**
 * {@link freeResources} of the worker row under `workerAlias`, as a relation of one row whose columns
 * are those of RESOURCE_COLUMNS.free (ints): its offer (RESOURCE_COLUMNS.worker) less the sum of what its
 * active work reserves (RESOURCE_COLUMNS.workRequest over the work_request rows with its worker_id for
 * which isActiveSql holds), each never below 0. An aggregate without grouping, so exactly one row even
 * for a worker that holds nothing. Use it after the worker in a FROM list, `cross join lateral
 * ${freeResourcesSql('w')} f`, or inside a subquery that reads the worker row (as fitsResourcesSql does).
 */
export const freeResourcesSql = (workerAlias: string): string => {
  const { worker, workRequest, free } = RESOURCE_COLUMNS;
  const columns = FIGURES.map(
    (f) => `greatest(0, ${workerAlias}.${worker[f]} - coalesce(sum(held.${workRequest[f]}), 0))::int as ${free[f]}`,
  );
  return `(select ${columns.join(', ')} from work_request held where held.worker_id = ${workerAlias}.id and ${isActiveSql('held')})`;
};

/**
 * {@link fitsResources} as a SQL condition: what the work_request row under `requestAlias` reserves fits in
 * what the worker row under `workerAlias` has free (freeResourcesSql). A request that is itself active
 * work of that worker counts in its free resources, as it does in freeResources.
 */
export const fitsResourcesSql = (workerAlias: string, requestAlias: string): string => {
  const { workRequest, free } = RESOURCE_COLUMNS;
  const fits = FIGURES.map((f) => `${requestAlias}.${workRequest[f]} <= free_of_worker.${free[f]}`);
  return `(select ${fits.join(' and ')} from ${freeResourcesSql(workerAlias)} free_of_worker)`;
};

/**
 * Whether `added`, assigned one after another to a worker offering `offered` whose active work reserves
 * `before`, would not each fit in turn (fitsResources on what is free after the ones before it): the
 * check of a batch of assignments to one worker made in one statement. In any order the same answer: a
 * figure is over-committed by the batch when the batch reserves some of it and the sum of everything
 * exceeds the offer.
 */
export const overCommittedBy = (
  offered: Resources,
  before: readonly Resources[],
  added: readonly Resources[],
): boolean => {
  const held = [...before];
  for (const a of added) {
    if (!fitsResources(a, freeResources(offered, held))) return true;
    held.push(a);
  }
  return false;
};

/**
 * {@link overCommittedBy} as a SQL condition on the worker row under `workerAlias`, its active work read
 * now (the batch already assigned), the batch being the requests of the one `?::int[]` parameter.
 */
export const overCommittedBySql = (workerAlias: string): string => {
  const { worker, workRequest } = RESOURCE_COLUMNS;
  const sums = FIGURES.map(
    (f) =>
      `(coalesce(sum(held.${workRequest[f]}), 0) > ${workerAlias}.${worker[f]} and coalesce(sum(held.${workRequest[f]}) filter (where held.id = any(batch.ids)), 0) > 0)`,
  );
  return `(select ${sums.join(' or ')} from work_request held, (select ?::int[] as ids) batch
            where held.worker_id = ${workerAlias}.id and ${isActiveSql('held')})`;
};

/** A piece of a worker's active work, as the reservation of a host sees it. */
export interface RunningWork {
  readonly reserved: Resources;
  /** Its start plus its task's expected run; one already past is taken as now. */
  readonly expectedEndAt: Date;
}

/** When a piece of running work is taken to end: its expected end, or now when that has passed. */
const endOf = (work: RunningWork, now: Date): number => Math.max(work.expectedEndAt.getTime(), now.getTime());

/**
 * The earliest time at which `request` fits on a worker offering `offered`, if its running work ends
 * at its expected ends: now when it fits now, else the first end (in order of the ends, a past one taken
 * as now) after which what is still running leaves room for it. Null when it does not fit in `offered`
 * even with nothing running.
 */
export const reservedStart = (
  offered: Resources,
  running: readonly RunningWork[],
  request: Resources,
  now: Date,
): Date | null => {
  if (!fitsResources(request, offered)) return null;
  if (
    fitsResources(
      request,
      freeResources(
        offered,
        running.map((w) => w.reserved),
      ),
    )
  )
    return now;
  const byEnd = [...running].sort((a, b) => endOf(a, now) - endOf(b, now));
  for (let ended = 1; ended <= byEnd.length; ended++) {
    const still = byEnd.slice(ended).map((w) => w.reserved);
    if (fitsResources(request, freeResources(offered, still))) return new Date(endOf(byEnd[ended - 1], now));
  }
  // Unreachable: with all of it ended the worker is free, and the request fits in what it offers.
  return null;
};

/** A request that could run now on a host reserved for another. */
export interface BackfillCandidate {
  readonly reserved: Resources;
  /** Its task's expected run in seconds; null when unknown. */
  readonly expectedSeconds: number | null;
}

/** A host's reservation: the request it is held for and when that request is to start (reservedStart). */
export interface Reservation {
  readonly request: Resources;
  readonly startsAt: Date;
}

/**
 * Whether `candidate` may run now on a worker reserved for `reservation.request`: it fits in what the
 * worker has free now, and either
 * - it leaves room for the reserved request at `startsAt` even if it is still running then: the work
 *   still running at `startsAt` (its end after it; work ending at `startsAt` exactly has ended), the
 *   candidate and the reserved request together fit in `offered`; or
 * - it is expected to have ended by then: now + expectedSeconds × safetyFactor is at or before
 *   `startsAt`. A candidate with no expected duration (null) has only the first way.
 */
export const mayBackfill = (
  candidate: BackfillCandidate,
  reservation: Reservation,
  offered: Resources,
  running: readonly RunningWork[],
  now: Date,
  safetyFactor: number,
): boolean => {
  if (
    !fitsResources(
      candidate.reserved,
      freeResources(
        offered,
        running.map((w) => w.reserved),
      ),
    )
  )
    return false;
  const startsAt = reservation.startsAt.getTime();
  const stillRunning = running.filter((w) => endOf(w, now) > startsAt).map((w) => w.reserved);
  const atStart = sum([...stillRunning, candidate.reserved, reservation.request]);
  if (fitsResources(atStart, offered)) return true;
  return (
    candidate.expectedSeconds !== null && now.getTime() + candidate.expectedSeconds * safetyFactor * 1000 <= startsAt
  );
};

/**
 * The defaults of a reservation: the factor a backfill candidate's expected run is stretched by
 * (mayBackfill), and how long a host may be held for one request before its reservation lapses
 * (reservationExpired), in seconds (six hours).
 */
export const RESERVATION_DEFAULTS = Object.freeze({ safetyFactor: 1.5, maxSeconds: 6 * 3600 });

/** Whether a reservation made at `since` has lapsed by `now`: it has been held for `maxSeconds` or more. */
export const reservationExpired = (since: Date, now: Date, maxSeconds: number): boolean =>
  now.getTime() - since.getTime() >= maxSeconds * 1000;
