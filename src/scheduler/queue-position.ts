import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../db/arrays.js';
import { aheadInQueueSql, effectivePrioritySql } from './fair-share.js';

/** Why a pending request of the same class is ahead of another in the queue (DESIGN §6, §17), as data. */
export const QUEUE_RULES = {
  /** Its effective priority (base + adjustment) is higher. */
  HIGHER_PRIORITY: 'HIGHER_PRIORITY',
  /**
   * The same priority and an earlier fair key, though submitted after it: only its workspace's turn
   * (fair-share.ts) puts it ahead, typically another workspace's request next to this one's backlog.
   */
  FAIR_SHARE: 'FAIR_SHARE',
  /** The same priority, and submitted before it (or at the same instant with a lower id): ahead by age, whatever the workspaces. */
  AGE: 'AGE',
} as const;
export type QueueRule = (typeof QUEUE_RULES)[keyof typeof QUEUE_RULES];

/** Where a pending request stands in the queue of its class: how many are ahead of it, by the rule that puts them there. */
export interface QueuePosition {
  /** Pending requests of its class ahead of it, all rules together. */
  readonly ahead: number;
  /** The same, per rule, in the order the rules apply (every rule, zero or not). */
  readonly aheadBy: readonly { readonly rule: QueueRule; readonly count: number }[];
}

/**
 * The queue positions of pending requests, by id, in one statement: for each, the pending requests of
 * its class (those that could take the same workers) ahead of it in queue order (aheadInQueueSql),
 * counted by why: a higher priority; at equal priority, submitted later (fair share alone puts them
 * ahead) or earlier (age). A walk of the class's part of the partial index
 * `work_request_pending_class_order`. Requests that are not PENDING are absent.
 */
export async function queuePositions(em: EntityManager, ids: readonly number[]): Promise<Map<number, QueuePosition>> {
  if (!ids.length) return new Map();
  const prio = effectivePrioritySql;
  const rows = await em.execute<{ id: number; higher_priority: number; fair_share: number; age: number }[]>(
    `select r.id,
            count(o.id) filter (where ${prio('o')} > ${prio('r')})::int as higher_priority,
            count(o.id) filter (where ${prio('o')} = ${prio('r')} and (o.created_at, o.id) > (r.created_at, r.id))::int as fair_share,
            count(o.id) filter (where ${prio('o')} = ${prio('r')} and (o.created_at, o.id) < (r.created_at, r.id))::int as age
       from work_request r
       left join work_request o on o.status = 'PENDING' and o.class_id = r.class_id and ${aheadInQueueSql('o', 'r')}
      where r.id = any(?::int[]) and r.status = 'PENDING'
      group by r.id`,
    [intArray(ids)],
  );
  return new Map(
    rows.map((r) => [
      r.id,
      {
        ahead: r.higher_priority + r.fair_share + r.age,
        aheadBy: [
          { rule: QUEUE_RULES.HIGHER_PRIORITY, count: r.higher_priority },
          { rule: QUEUE_RULES.FAIR_SHARE, count: r.fair_share },
          { rule: QUEUE_RULES.AGE, count: r.age },
        ],
      },
    ]),
  );
}
