import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray, toDate } from '../../storage/db/arrays.js';
import { activeByWorkerSql, freeSlots } from '../rules/active-work.js';
import {
  AVAILABILITY_FACTS,
  AVAILABILITY_WORKER_COLUMNS,
  unavailableReason,
  type AvailabilityFact,
  type AvailabilityFacts,
} from '../rules/availability.js';
import { MatchKeys } from '../matching/match-keys.js';
import type { WorkerState } from '../matching/worker-state.js';

/** What a worker is, as opposed to what it is doing: kept between operations. */
type WorkerShape = Pick<WorkerState, 'name' | 'type' | 'poolId' | 'providedTags' | 'requiredTags' | 'concurrency'> & {
  readonly version: string;
  readonly registeredAt: Date;
  readonly instanceCreatedAt: Date | null;
};

/**
 * The worker columns worker_state copies besides the id (its `worker_id`), by trigger worker_state_copy
 * of migration worker_state: the shape version, the columns of the availability facts and the last
 * completion, as test/scheduler/worker-state-columns.test.ts checks on the table, its trigger and its entity.
 */
export const WORKER_STATE_COPIED_COLUMNS: readonly string[] = [
  'shape_version',
  ...AVAILABILITY_WORKER_COLUMNS,
  'last_completed_at',
];

/**
 * The times worker_state also keeps as epoch milliseconds, computed by its trigger once per change
 * rather than at every read: its column for each (a fact of kind `ms` under its row name), and the
 * worker column it is computed from.
 */
export const WORKER_STATE_MS_COLUMNS: Readonly<Record<string, string>> = {
  ...Object.fromEntries(AVAILABILITY_FACTS.filter((f) => f.kind === 'ms').map((f) => [f.row, f.column])),
  last_completed_ms: 'last_completed_at',
};

// How STATE_SQL packs the availability facts of a worker_state row: the boolean ones as the bits of
// one int, in the list's order; the others (its type, its report time in ms) as fields of their own.
const FLAG_FACTS = AVAILABILITY_FACTS.filter((f) => f.kind === 'flag' || f.kind === 'set');
const FIELD_FACTS = AVAILABILITY_FACTS.filter((f) => f.kind === 'text' || f.kind === 'ms');
const flagSql = (f: AvailabilityFact, bit: number) =>
  `(${f.kind === 'set' ? `(s.${f.column} is not null)` : `s.${f.column}`}::int << ${bit})`;
const fieldSql = (f: AvailabilityFact) => (f.kind === 'ms' ? `s.${f.row}` : `s.${f.column}`);
// What decodeState reads back, in the same order: each field's fact and whether it is text; each flag's fact and its bit.
const FIELDS = FIELD_FACTS.map((f) => [f.fact, f.kind === 'text'] as const);
const FLAGS = FLAG_FACTS.map((f, bit) => [f.fact, 1 << bit] as const);

// What changes all the time (connection, reports, load), read for every worker each time; with the
// version of its shape, which PostgreSQL raises whenever the shape changes (migration worker_shape).
// From worker_state, the narrow copy of those columns that PostgreSQL keeps (migration worker_state):
// 10,000 workers' state is about 1 MB there, against some 40 MB of worker rows with their tags, and
// its times are already epoch milliseconds. Each worker comes as one text, `decodeState`'s format:
// for 10,000 workers, splitting one text is much cheaper than the driver's parsing of ten columns.
// No ORDER BY: the rows are put in name order from the shapes kept here.
const STATE_SQL = `
  select concat(s.worker_id, ',', s.shape_version, ',', ${FIELD_FACTS.map((f) => `${fieldSql(f)}, ','`).join(', ')},
                ${FLAG_FACTS.map(flagSql).join(' | ')}, ',',
                s.last_completed_ms, ',', coalesce(a.active, 0)) as state
    from worker_state s
    -- Only the work held now (the partial index work_request_active_worker), never the history.
    left join ${activeByWorkerSql()} a on a.worker_id = s.worker_id
   where s.terminated_at is null`;

/**
 * One worker's state as STATE_SQL packs it: id, shape version, the facts' fields (a time in ms, empty
 * when null), their flags, the last completion (ms, empty when null), load.
 */
function decodeState(text: string): {
  id: number;
  version: string;
  facts: AvailabilityFacts;
  lastCompletedMs: number | null;
  active: number;
} {
  const parts = text.split(',');
  const facts: Record<string, unknown> = {};
  let i = 2;
  for (const [fact, isText] of FIELDS) {
    const part = parts[i++];
    facts[fact] = isText ? part : part === '' ? null : Number(part);
  }
  const bits = Number(parts[i++]);
  for (const [fact, mask] of FLAGS) facts[fact] = (bits & mask) !== 0;
  const completed = parts[i++];
  return {
    id: Number(parts[0]),
    version: parts[1],
    facts: facts as AvailabilityFacts,
    lastCompletedMs: completed === '' ? null : Number(completed),
    active: Number(parts[i]),
  };
}

// The shapes of the workers this process has not seen, or has seen at an older version. Tag arrays
// travel as JSON, which the driver parses natively; its text[] parser is four times slower.
const SHAPE_SQL = `
  select id, shape_version::text as version, name, type, pool_id, to_json(provided_tags) as provided_tags,
         to_json(required_tags) as required_tags, concurrency, registered_at, instance_created_at
    from worker where id = any(?::int[])`;

/**
 * Every active worker with its load, for the bulk questions (candidates, diagnosis, demand). The
 * shapes (tags above all: most of the bytes) are kept in the process between operations and re-read
 * only for workers whose shape version moved, so an operation over 10,000 workers reads their state
 * (a few small columns) and not their tags. Shared by the operations of one server process.
 */
export class WorkerSnapshot {
  private shapes = new Map<number, WorkerShape>();
  /** Shapes read in full so far (what the snapshot spares shows as this not growing). */
  shapesRead = 0;
  /** Match keys for the candidates: every requirement asked about so far in this process (they only grow). */
  private readonly keys = new MatchKeys();
  private keysGeneration = 0;
  /** Per worker shape, its key under `keys` and the generation it was computed in. */
  private readonly keyOfShape = new WeakMap<WorkerShape, { generation: number; key: string }>();

  /** The workers that are not terminated, in name order, with their state now. */
  async load(em: EntityManager, now: Date, freshMs: number): Promise<WorkerState[]> {
    const rows = (await em.execute<{ state: string }[]>(STATE_SQL)).map((r) => decodeState(r.state));
    const outdated = rows.filter((r) => this.shapes.get(r.id)?.version !== r.version).map((r) => r.id);
    if (outdated.length) await this.read(em, outdated);
    if (this.shapes.size > rows.length) this.forgetAllBut(rows.map((r) => r.id)); // terminated or removed
    const states: WorkerState[] = [];
    for (const r of rows) {
      const s = this.shapes.get(r.id);
      if (!s) continue; // removed between the two statements
      const unavailable = unavailableReason(r.facts, now, freshMs);
      states.push({
        id: r.id,
        name: s.name,
        type: s.type,
        poolId: s.poolId,
        providedTags: s.providedTags,
        requiredTags: s.requiredTags,
        concurrency: s.concurrency,
        active: r.active,
        unavailable,
        free: unavailable ? 0 : freeSlots(s.concurrency, r.active),
        idleSince: r.lastCompletedMs === null ? (s.instanceCreatedAt ?? s.registeredAt) : new Date(r.lastCompletedMs),
        instanceCreatedAt: s.instanceCreatedAt,
      });
    }
    // Name order (code unit order, as everywhere in the bulk questions); names are unique.
    return states.sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /**
   * Match keys for tasks with these requirements, kept per worker shape between calls: keys under
   * more requirements than asked are finer, never wrong (equal keys decide every requirement alike),
   * and keying 10,000 workers is most of a candidates call. Computed again only for shapes that
   * changed, or when a requirement never seen before arrives.
   */
  keying(requiredTags: readonly string[]): (w: WorkerState) => string {
    if (this.keys.add(requiredTags)) this.keysGeneration++;
    const generation = this.keysGeneration;
    return (w) => {
      const shape = this.shapes.get(w.id);
      // A state made from another read (or a shape replaced since): key it afresh.
      if (
        !shape ||
        shape.providedTags !== w.providedTags ||
        shape.requiredTags !== w.requiredTags ||
        shape.type !== w.type
      )
        return this.keys.keyOf(w);
      let cached = this.keyOfShape.get(shape);
      if (cached?.generation !== generation)
        this.keyOfShape.set(shape, (cached = { generation, key: this.keys.keyOf(w) }));
      return cached.key;
    };
  }

  private async read(em: EntityManager, ids: readonly number[]): Promise<void> {
    const rows = await em.execute<
      {
        id: number;
        version: string;
        name: string;
        type: string;
        pool_id: number | null;
        provided_tags: string[];
        required_tags: string[];
        concurrency: number;
        registered_at: string;
        instance_created_at: string | null;
      }[]
    >(SHAPE_SQL, [intArray(ids)]);
    this.shapesRead += rows.length;
    for (const r of rows) {
      this.shapes.set(r.id, {
        version: r.version,
        name: r.name,
        type: r.type,
        poolId: r.pool_id,
        providedTags: r.provided_tags,
        requiredTags: r.required_tags,
        concurrency: r.concurrency,
        registeredAt: toDate(r.registered_at)!,
        instanceCreatedAt: toDate(r.instance_created_at),
      });
    }
  }

  private forgetAllBut(ids: readonly number[]): void {
    const keep = new Set(ids);
    for (const id of this.shapes.keys()) if (!keep.has(id)) this.shapes.delete(id);
  }
}

/**
 * Every worker that is not terminated, with its load: with a process's `snapshot`, only what changed
 * since its last call is read in full; without one, everything.
 */
export function loadWorkerStates(
  em: EntityManager,
  now: Date,
  freshMs: number,
  snapshot: WorkerSnapshot = new WorkerSnapshot(),
): Promise<WorkerState[]> {
  return snapshot.load(em, now, freshMs);
}
