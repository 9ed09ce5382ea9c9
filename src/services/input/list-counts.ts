/**
 * What some lists of the API hold now, counted before an operation runs: the cost model
 * (src/api/limits/list-bounds.ts) counts the smaller of this and a list's maximum, so that a small site
 * pays for what it has. Each count answers the most items the list holds for any one parent.
 */
import type { EntityManager } from '@mikro-orm/postgresql';

/** The rows of a table. */
const all = (table: string) => `select count(*)::int as n from ${table}`;
/** The most rows of a table under one parent. */
const mostPer = (table: string, parent: string) =>
  `select coalesce(max(c), 0)::int as n from (select count(*) as c from ${table} where ${parent} is not null group by ${parent}) per_parent`;

const COUNTS = {
  workspaces: all('workspace'),
  groups: all('user_group'),
  tokens: all('token'),
  workerImages: all('worker_image'),
  environments: all('environment'),
  pools: all('worker_pool'),
  siteRules: `${all('task_rule')} where workspace_id is null`,
  rulesPerWorkspace: mostPer('task_rule', 'workspace_id'),
  membersPerWorkspace: mostPer('workspace_member', 'workspace_id'),
  membersPerGroup: mostPer('user_group_member', 'group_id'),
  publicationsPerImage: mostPer('worker_image_publication', 'image_id'),
} as const;

/** The name of a count. */
export type ListCount = keyof typeof COUNTS;

/** Counts what these lists hold now, by name, in one statement (none for no name). */
export async function countLists(em: EntityManager, names: readonly ListCount[]): Promise<Map<ListCount, number>> {
  const counted = [...new Set(names)];
  if (!counted.length) return new Map();
  const [row] = await em.execute<Record<string, number>[]>(
    `select ${counted.map((name, i) => `(${COUNTS[name]}) as c${i}`).join(', ')}`,
  );
  return new Map(counted.map((name, i) => [name, Number(row?.[`c${i}`] ?? 0)]));
}
