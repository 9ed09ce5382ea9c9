import type { EntityManager } from '@mikro-orm/postgresql';
import { toDate } from '../db/arrays.js';
import { unavailableReason, type UnavailableReason } from './availability.js';

/** A worker as the bulk questions (candidates, diagnosis, demand) see it. */
export interface WorkerState {
  readonly id: number;
  readonly name: string;
  readonly type: string;
  readonly poolId: number | null;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
  readonly concurrency: number;
  /** Requests it holds (ASSIGNED or RUNNING). */
  readonly active: number;
  readonly unavailable: UnavailableReason | null;
  /** Free slots now: 0 when unavailable. */
  readonly free: number;
  /** When it last finished work, or was created: idle since then when it holds nothing. */
  readonly idleSince: Date | null;
}

/** Every worker that is not terminated, with its load, in one statement whatever their number or their history. */
export async function loadWorkerStates(em: EntityManager, now: Date, freshMs: number): Promise<WorkerState[]> {
  const rows = await em.execute<
    {
      id: number; name: string; type: string; pool_id: number | null; provided_tags: string[]; required_tags: string[]; concurrency: number;
      enabled: boolean; draining: boolean; shutting_down: boolean; terminated_at: string | null; connected_at: string | null; last_seen_at: string | null; registered_at: string;
      instance_created_at: string | null; active: number; last_done: string | null;
    }[]
  >(
    // Named columns only: the metadata and tag entries are large JSON that nothing here reads. The tag
    // arrays travel as JSON, which the driver parses natively; its text[] parser is four times slower.
    `select w.id, w.name, w.type, w.pool_id, to_json(w.provided_tags) as provided_tags, to_json(w.required_tags) as required_tags,
            w.concurrency, w.enabled, w.draining, w.shutting_down,
            w.terminated_at, w.connected_at, w.last_seen_at, w.registered_at, w.instance_created_at,
            coalesce(a.active, 0)::int as active, w.last_completed_at as last_done
       from worker w
       left join (
         -- Only the work held now (the partial index work_request_active_worker), never the history.
         select worker_id, count(*) as active from work_request where status in ('ASSIGNED', 'RUNNING') group by worker_id
       ) a on a.worker_id = w.id
      where w.terminated_at is null
      order by w.name`,
  );
  return rows.map((r) => {
    const unavailable = unavailableReason(
      { type: r.type, enabled: r.enabled, draining: r.draining, shuttingDown: r.shutting_down, terminatedAt: r.terminated_at, connectedAt: r.connected_at, lastSeenAt: r.last_seen_at },
      now,
      freshMs,
    );
    return {
      id: r.id,
      name: r.name,
      type: r.type,
      poolId: r.pool_id,
      providedTags: r.provided_tags,
      requiredTags: r.required_tags,
      concurrency: r.concurrency,
      active: r.active,
      unavailable,
      free: unavailable ? 0 : Math.max(0, r.concurrency - r.active),
      idleSince: toDate(r.last_done ?? r.instance_created_at ?? r.registered_at),
    };
  });
}

/** Groups items by a key, keeping first-seen order. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/** The key under which workers decide every task identically: type and both tag sets. */
export const workerSignature = (w: Pick<WorkerState, 'type' | 'providedTags' | 'requiredTags'>) =>
  `${w.type}\u0000${[...w.providedTags].sort().join(' ')}\u0000${[...w.requiredTags].sort().join(' ')}`;
