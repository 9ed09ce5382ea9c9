/**
 * Who may see what (docs/design.md: interfaces, docs/reference/security.md): the one home of the visibility rules for work
 * requests, workspaces, groups, task rules and worker details. Each rule exists in two forms that
 * must agree (test/security/visibility-rules.property.test.ts checks it over generated directories):
 *
 * - a SQL condition over one row, for lists and raw SQL: `workRequestSql(principal, 'wr')` is a
 *   boolean expression over the row aliased `wr`; `asFilter` (storage/db/condition.ts) makes it an ORM filter;
 * - a TypeScript predicate over a row already loaded: `canSeeWorkRequest(audience, facts)`.
 *
 * The SQL form reads memberships from the tables themselves and needs only who is asking (a
 * `Principal`); the predicate takes an `Audience`, the principal with its memberships read once
 * per operation (`audienceOf`).
 *
 * The rules:
 * - a workspace: public ones to everybody; private ones to their members and admins;
 * - a work request: workers see only the requests assigned to them (docs/design.md: interfaces), activation tokens
 *   none; everybody else the requests of the workspaces they may see;
 * - a group: admins and its members; others when they may see its workspace, or, for a scope-wide
 *   group, some workspace of its scope (a scope with only private workspaces shows nothing);
 * - a task rule: site rules to everybody; a workspace's rules with the workspace;
 * - member lists (of a workspace, of a group): admins and the members themselves;
 * - a worker's details (metadata and tags): admins, signed-in users, and the worker itself (also
 *   the caller of the activation token it was just made for); the same for the tags a diagnosis or
 *   the demand names against a group of workers (others get their counts);
 *   everybody sees a worker's name, type, pool and status, as Debusine shows anonymous visitors;
 * - task statistics (counts, medians and p95 of what runs used per task, package and architecture):
 *   every authenticated caller, since they name no request, workspace or user; anonymous callers none.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { ALWAYS, NEVER, type SqlCondition } from '../../storage/db/condition.js';
import type { Viewer } from './auth.js';

/** Who is asking, as the SQL form of the rules needs it: a kind and an id. */
export interface Principal {
  readonly kind: 'admin' | 'user' | 'worker' | 'activation' | 'anonymous';
  /** The user of a user or admin token. */
  readonly userId: number | null;
  /** The worker of a worker token (or the one an activation token just became). */
  readonly workerId: number | null;
}

/** A principal with what it belongs to, read once per operation: what the TypeScript predicates need. */
export interface Audience extends Principal {
  /** Ids of the workspaces the user is a member of (any role). */
  readonly memberOf: ReadonlySet<number>;
  /** Ids of the groups the user is a member of. */
  readonly groups: ReadonlySet<number>;
}

/** What the workspace rule reads of a workspace row. */
export interface WorkspaceFacts {
  readonly id: number;
  readonly isPublic: boolean;
}

/** What the work request rule reads of a request row. */
export interface WorkRequestFacts {
  readonly workspace: WorkspaceFacts;
  readonly workerId: number | null;
}

/** What the group rule reads of a group row: its workspace, or for a scope-wide group the workspaces of its scope. */
export interface GroupFacts {
  readonly id: number;
  readonly workspace: WorkspaceFacts | null;
  readonly scopeWorkspaces: readonly WorkspaceFacts[];
}

/** What the task rule rule reads of a rule row: its workspace, null for a site rule. */
export interface RuleFacts {
  readonly workspace: WorkspaceFacts | null;
}

// The worker an activation token's caller became in this operation (activateWorker): it answers with
// that worker, which the caller may see as the worker itself would.
const activated = new WeakMap<Viewer, number>();

/** Records that the caller of an activation token became this worker (for the rest of the operation). */
export function noteActivation(viewer: Viewer, workerId: number): void {
  activated.set(viewer, workerId);
}

/** The principal of a viewer. */
export function principalOf(viewer: Viewer): Principal {
  switch (viewer.kind) {
    case 'user':
      return { kind: viewer.isAdmin ? 'admin' : 'user', userId: viewer.user.id, workerId: null };
    case 'worker':
      return { kind: 'worker', userId: null, workerId: viewer.worker.id };
    case 'activation':
      return { kind: 'activation', userId: null, workerId: activated.get(viewer) ?? null };
    case 'anonymous':
      return { kind: 'anonymous', userId: null, workerId: null };
  }
}

/**
 * Reads a principal's memberships (one statement for a user, none otherwise: every rule below lets an
 * admin see everything before it looks at memberships, and workers and activation tokens have none).
 */
export async function loadAudience(em: EntityManager, principal: Principal): Promise<Audience> {
  if (principal.kind !== 'user') return { ...principal, memberOf: new Set(), groups: new Set() };
  const [row] = await em.execute<{ members: number[]; groups: number[] }[]>(
    `select to_json(array(select workspace_id from workspace_member where user_id = ?)) as members,
            to_json(array(select group_id from user_group_member where user_id = ?)) as groups`,
    [principal.userId, principal.userId],
  );
  return { ...principal, memberOf: new Set(row.members), groups: new Set(row.groups) };
}

// One audience per viewer object: a viewer lives for one operation (or one subscription event), so
// memberships are read at most once per operation and never outlive it.
const audiences = new WeakMap<Viewer, Promise<Audience>>();

/** The audience of a viewer, read on first use in the operation. */
export function audienceOf(em: EntityManager, viewer: Viewer): Promise<Audience> {
  let audience = audiences.get(viewer);
  if (!audience) {
    audience = loadAudience(em, principalOf(viewer));
    audiences.set(viewer, audience);
    audience.catch(() => audiences.delete(viewer));
  }
  return audience;
}

/** Public workspaces to everybody; private ones to their members and admins. */
export function canSeeWorkspace(a: Audience, w: WorkspaceFacts): boolean {
  return a.kind === 'admin' || w.isPublic || a.memberOf.has(w.id);
}

/** SQL form of {@link canSeeWorkspace}, over the `workspace` row `alias`. */
export function workspaceSql(p: Principal, alias: string): SqlCondition {
  if (p.kind === 'admin') return ALWAYS;
  if (p.kind === 'user') {
    return {
      sql: `(${alias}.is_public or exists (select 1 from workspace_member vis_m where vis_m.workspace_id = ${alias}.id and vis_m.user_id = ?))`,
      params: [p.userId],
    };
  }
  return { sql: `${alias}.is_public`, params: [] };
}

/** Member lists of a workspace: admins and its members. */
export function canSeeWorkspaceMembers(a: Audience, w: WorkspaceFacts): boolean {
  return a.kind === 'admin' || a.memberOf.has(w.id);
}

/** Workers see their own assignments; activation tokens nothing; the others the work of the workspaces they may see. */
export function canSeeWorkRequest(a: Audience, r: WorkRequestFacts): boolean {
  if (a.kind === 'worker') return r.workerId === a.workerId;
  if (a.kind === 'activation') return false;
  return canSeeWorkspace(a, r.workspace);
}

/** SQL form of {@link canSeeWorkRequest}, over the `work_request` row `alias`. */
export function workRequestSql(p: Principal, alias: string): SqlCondition {
  if (p.kind === 'admin') return ALWAYS;
  if (p.kind === 'worker') return { sql: `${alias}.worker_id = ?`, params: [p.workerId] };
  if (p.kind === 'activation') return NEVER;
  const ws = workspaceSql(p, 'vis_w');
  return {
    sql: `exists (select 1 from workspace vis_w where vis_w.id = ${alias}.workspace_id and ${ws.sql})`,
    params: ws.params,
  };
}

/** Admins and the group's members; others with its workspace, or for a scope-wide group with some workspace of its scope. */
export function canSeeGroup(a: Audience, g: GroupFacts): boolean {
  if (a.kind === 'admin' || a.groups.has(g.id)) return true;
  return g.workspace ? canSeeWorkspace(a, g.workspace) : g.scopeWorkspaces.some((w) => canSeeWorkspace(a, w));
}

/** SQL form of {@link canSeeGroup}, over the `user_group` row `alias`. */
export function groupSql(p: Principal, alias: string): SqlCondition {
  if (p.kind === 'admin') return ALWAYS;
  const ws = workspaceSql(p, 'vis_w');
  const member =
    p.kind === 'user'
      ? `exists (select 1 from user_group_member vis_g where vis_g.group_id = ${alias}.id and vis_g.user_id = ?) or `
      : '';
  return {
    sql: `(${member}exists (select 1 from workspace vis_w where ${ws.sql}
            and (vis_w.id = ${alias}.workspace_id or (${alias}.workspace_id is null and vis_w.scope_id = ${alias}.scope_id))))`,
    params: p.kind === 'user' ? [p.userId, ...ws.params] : ws.params,
  };
}

/** Member lists of a group: admins and its members. */
export function canSeeGroupMembers(a: Audience, g: { id: number }): boolean {
  return a.kind === 'admin' || a.groups.has(g.id);
}

/** Site rules to everybody; a workspace's rules with its workspace. */
export function canSeeRule(a: Audience, r: RuleFacts): boolean {
  return r.workspace === null || canSeeWorkspace(a, r.workspace);
}

/** SQL form of {@link canSeeRule}, over the `task_rule` row `alias`. */
export function ruleSql(p: Principal, alias: string): SqlCondition {
  const ws = workspaceSql(p, 'vis_w');
  return {
    sql: `(${alias}.workspace_id is null or exists (select 1 from workspace vis_w where vis_w.id = ${alias}.workspace_id and ${ws.sql}))`,
    params: ws.params,
  };
}

/** A worker's metadata and tags: admins, signed-in users and the worker itself (name, type, pool and status are public). */
export function canSeeWorkerDetails(p: Principal, worker: { id: number }): boolean {
  return p.kind === 'admin' || p.kind === 'user' || (p.workerId !== null && p.workerId === worker.id);
}

/** SQL form of {@link canSeeWorkerDetails}, over the `worker` row `alias`. */
export function workerDetailsSql(p: Principal, alias: string): SqlCondition {
  if (p.kind === 'admin' || p.kind === 'user') return ALWAYS;
  if (p.workerId !== null) return { sql: `${alias}.id = ?`, params: [p.workerId] };
  return NEVER;
}

/**
 * The tags of a mismatch (diagnosis, provisioning demand) against a group of workers: they are those
 * workers' tags (what they require; what they lack, by its complement), so they go only to who may
 * see every worker's details. A pool's mismatch (no workers) is public, as the pool's tags are.
 */
export function canSeeWorkerGroupTags(p: Principal, workerIds: readonly number[]): boolean {
  return workerIds.every((id) => canSeeWorkerDetails(p, { id }));
}

/**
 * Whether `p` may read task statistics (Query.taskStatistics, the status page's line): a task as a whole,
 * any authenticated caller (runs counted across workspaces, naming none); per source package and
 * architecture, admins only, since those figures count private workspaces' runs too and would tell an
 * outsider that a private workspace built a package, and when.
 */
export function canSeeTaskStatistics(p: Principal, perPackage: boolean): boolean {
  return perPackage ? p.kind === 'admin' : p.kind !== 'anonymous';
}

/** Whether the viewer may see a work request whose workspace is loaded (one check, for a row already read). */

export async function viewerSeesWorkRequest(
  em: EntityManager,
  viewer: Viewer,
  wr: { workspace: WorkspaceFacts; worker?: { id: number } | null },
): Promise<boolean> {
  return canSeeWorkRequest(await audienceOf(em, viewer), { workspace: wr.workspace, workerId: wr.worker?.id ?? null });
}

/** Whether the viewer may see a loaded workspace. */
export async function viewerSeesWorkspace(
  em: EntityManager,
  viewer: Viewer,
  workspace: WorkspaceFacts,
): Promise<boolean> {
  return canSeeWorkspace(await audienceOf(em, viewer), workspace);
}
