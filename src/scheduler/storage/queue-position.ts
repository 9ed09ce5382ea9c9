import type { EntityManager } from '@mikro-orm/postgresql';
import { intArray } from '../../storage/db/arrays.js';
import { aheadInQueueSql, QUEUE_RULES, queueRuleSql, type QueuePosition } from '../rules/queue-order.js';

/**
 * The queue positions of pending requests, by id, in one statement: for each, the pending requests of
 * its class (those that could take the same workers) ahead of it in queue order (aheadInQueueSql),
 * counted by the rule that puts them there (queueRuleSql, rules/queue-order.ts). A walk of the class's
 * part of the partial index `work_request_pending_class_order`. Requests that are not PENDING are absent.
 */
export async function queuePositions(em: EntityManager, ids: readonly number[]): Promise<Map<number, QueuePosition>> {
  if (!ids.length) return new Map();
  const rule = queueRuleSql('o', 'r');
  const rows = await em.execute<{ id: number; higher_priority: number; fair_share: number; age: number }[]>(
    `select r.id,
            count(o.id) filter (where ${rule.HIGHER_PRIORITY})::int as higher_priority,
            count(o.id) filter (where ${rule.FAIR_SHARE})::int as fair_share,
            count(o.id) filter (where ${rule.AGE})::int as age
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
