/** The reads of the directory that the API lists, only what the viewer may see (visibility.ts), and the workspaces' names the metrics label work with. */
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { asFilter } from '../../storage/db/condition.js';
import { GroupSchema, type Group } from '../../storage/entities/group.js';
import { WorkspaceSchema, type Workspace } from '../../storage/entities/workspace.js';
import type { Viewer } from './auth.js';
import { groupSql, principalOf, workspaceSql } from './visibility.js';

/** The workspaces the viewer may see, with their scope, by scope and name; `limit` at most (one statement). */
export function visibleWorkspaces(em: EntityManager, viewer: Viewer, limit: number): Promise<Workspace[]> {
  const principal = principalOf(viewer);
  return em.find(
    WorkspaceSchema,
    asFilter((alias) => workspaceSql(principal, alias)),
    { populate: ['scope'], orderBy: { scope: { name: 'asc' }, name: 'asc' }, limit },
  );
}

/** The workspace `scope/name` with its scope, when the viewer may see it; null otherwise (one statement). */
export function visibleWorkspace(
  em: EntityManager,
  viewer: Viewer,
  scope: string,
  name: string,
): Promise<Workspace | null> {
  const principal = principalOf(viewer);
  const where: FilterQuery<Workspace>[] = [
    { scope: { name: scope }, name },
    asFilter((alias) => workspaceSql(principal, alias)),
  ];
  return em.findOne(WorkspaceSchema, { $and: where }, { populate: ['scope'] });
}

/** The groups of a scope the viewer may see, with their scope, by name; `limit` at most (one statement). */
export function visibleGroups(em: EntityManager, viewer: Viewer, scope: string, limit: number): Promise<Group[]> {
  const principal = principalOf(viewer);
  const where: FilterQuery<Group>[] = [{ scope: { name: scope } }, asFilter((alias) => groupSql(principal, alias))];
  return em.find(GroupSchema, { $and: where }, { populate: ['scope'], orderBy: { name: 'asc' }, limit });
}

/** Every workspace's id, `scope/name` and whether it is public (one statement). */
export function workspaceNames(em: EntityManager): Promise<{ id: number; name: string; is_public: boolean }[]> {
  return em.execute<{ id: number; name: string; is_public: boolean }[]>(
    `select w.id, s.name || '/' || w.name as name, w.is_public from workspace w join scope s on s.id = w.scope_id`,
  );
}
