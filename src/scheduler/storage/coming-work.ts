import type { EntityManager } from '@mikro-orm/postgresql';
import { isActiveSql } from '../rules/active-work.js';
import { isComingWorkSql } from '../rules/look-ahead.js';

/**
 * Coming work per class (rules/look-ahead.ts): the BLOCKED requests that wait only on active work,
 * counted by the class their tags had at submission. Read from the active requests outwards (their
 * dependents, through the index on `depends_on_id`), so the statement grows with the work running
 * now, not with every BLOCKED request of every workflow. In class id order, like the pending counts.
 */
export async function comingByClass(em: EntityManager): Promise<{ class_id: number; n: number }[]> {
  return em.execute<{ class_id: number; n: number }[]>(
    `select b.expected_class_id as class_id, count(*)::int as n
       from (select distinct d.work_request_id as id
               from work_request a join work_request_dependency d on d.depends_on_id = a.id
              where ${isActiveSql('a')}) c
       join work_request b on b.id = c.id
      where b.status = 'BLOCKED' and b.expected_class_id is not null and ${isComingWorkSql('b')}
      group by b.expected_class_id order by b.expected_class_id`,
  );
}
