/**
 * The two forms of every visibility rule agree (src/services/identity/visibility.ts): for generated
 * directories (users, scopes, public and private workspaces, memberships, groups, rules, workers,
 * work requests) written to PostgreSQL, and every viewer of them, the rows the SQL condition keeps
 * are exactly the rows the TypeScript predicate keeps, given the audience as loadAudience reads it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import {
  canSeeGroup,
  canSeeRule,
  canSeeWorkerDetails,
  canSeeWorkRequest,
  canSeeWorkspace,
  groupSql,
  loadAudience,
  ruleSql,
  workerDetailsSql,
  workRequestSql,
  workspaceSql,
  type Principal,
  type WorkspaceFacts,
} from '../../src/services/identity/visibility.js';
import type { SqlCondition } from '../../src/storage/db/condition.js';

const t = useTestApp();

const USERS = 4;
const WORKERS = 3;
const SCOPES = 3;

const directory = fc.record({
  admins: fc.array(fc.boolean(), { minLength: USERS, maxLength: USERS }),
  workspaces: fc.array(fc.record({ scope: fc.nat(SCOPES - 1), isPublic: fc.boolean() }), {
    minLength: 1,
    maxLength: 5,
  }),
  members: fc.array(fc.record({ user: fc.nat(USERS - 1), workspace: fc.nat(4) }), { maxLength: 8 }),
  groups: fc.array(
    fc.record({
      scope: fc.nat(SCOPES - 1),
      workspace: fc.option(fc.nat(4), { nil: null }),
      members: fc.subarray([0, 1, 2, 3]),
    }),
    { maxLength: 5 },
  ),
  rules: fc.array(fc.option(fc.nat(4), { nil: null }), { maxLength: 5 }),
  requests: fc.array(fc.record({ workspace: fc.nat(4), worker: fc.option(fc.nat(WORKERS - 1), { nil: null }) }), {
    maxLength: 10,
  }),
});
type Directory = typeof directory extends fc.Arbitrary<infer T> ? T : never;

const TABLES =
  'work_request, task_rule, user_group_member, user_group, workspace_member, workspace, scope, worker, token, app_user';

/** Writes a directory to the (emptied) database; ids are 1-based in list order. */
async function write(d: Directory): Promise<void> {
  await t.sql(`truncate ${TABLES} restart identity cascade`);
  const ws = d.workspaces;
  const wsOf = (i: number) => (i % ws.length) + 1;
  for (let u = 0; u < USERS; u++)
    await t.sql(`insert into app_user (username, is_admin, created_at) values (?, ?, now())`, [`u${u}`, d.admins[u]]);
  for (let s = 0; s < SCOPES; s++) await t.sql(`insert into scope (name, created_at) values (?, now())`, [`s${s}`]);
  for (const [i, w] of ws.entries())
    await t.sql(`insert into workspace (scope_id, name, is_public, created_at) values (?, ?, ?, now())`, [
      w.scope + 1,
      `w${i}`,
      w.isPublic,
    ]);
  for (const m of d.members) {
    await t.sql(
      `insert into workspace_member (workspace_id, user_id, role) values (?, ?, 'viewer') on conflict do nothing`,
      [wsOf(m.workspace), m.user + 1],
    );
  }
  for (const [i, g] of d.groups.entries()) {
    // A group tied to a workspace lives in that workspace's scope.
    const scope = g.workspace === null ? g.scope + 1 : ws[g.workspace % ws.length].scope + 1;
    await t.sql(`insert into user_group (scope_id, workspace_id, name) values (?, ?, ?)`, [
      scope,
      g.workspace === null ? null : wsOf(g.workspace),
      `g${i}`,
    ]);
    for (const u of g.members)
      await t.sql(`insert into user_group_member (group_id, user_id) values (?, ?)`, [i + 1, u + 1]);
  }
  for (const [i, r] of d.rules.entries())
    await t.sql(`insert into task_rule (workspace_id, name, created_at) values (?, ?, now())`, [
      r === null ? null : wsOf(r),
      `r${i}`,
    ]);
  for (let w = 0; w < WORKERS; w++)
    await t.sql(`insert into worker (name, registered_at) values (?, now())`, [`k${w}`]);
  for (const r of d.requests) {
    await t.sql(
      `insert into work_request (workspace_id, created_by_id, task_type, task_name, task_data, worker_id, created_at) values (?, 1, 'worker', 'noop', '{}', ?, now())`,
      [wsOf(r.workspace), r.worker === null ? null : r.worker + 1],
    );
  }
}

/** Every viewer of the directory: anonymous, an activation token, each user (admin or not), each worker. */
function principals(d: Directory): Principal[] {
  return [
    { kind: 'anonymous', userId: null, workerId: null },
    { kind: 'activation', userId: null, workerId: null },
    { kind: 'activation', userId: null, workerId: 1 }, // the caller of an activation token, once it became worker 1
    ...d.admins.map((isAdmin, u): Principal => ({ kind: isAdmin ? 'admin' : 'user', userId: u + 1, workerId: null })),
    ...Array.from({ length: WORKERS }, (_, w): Principal => ({ kind: 'worker', userId: null, workerId: w + 1 })),
  ];
}

/** The ids of `table` whose row meets the condition. */
async function kept(table: string, condition: (alias: string) => SqlCondition): Promise<number[]> {
  const c = condition('x');
  return (await t.sql<{ id: number }>(`select x.id from ${table} x where ${c.sql} order by x.id`, [...c.params])).map(
    (r) => r.id,
  );
}

describe('the SQL and TypeScript forms of each visibility rule agree', () => {
  it('over generated directories and every viewer', async () => {
    await fc.assert(
      fc.asyncProperty(directory, async (d) => {
        await write(d);
        const workspaces = await t.sql<{ id: number; scope_id: number; is_public: boolean }>(
          'select id, scope_id, is_public from workspace order by id',
        );
        const facts = new Map<number, WorkspaceFacts>(
          workspaces.map((w) => [w.id, { id: w.id, isPublic: w.is_public }]),
        );
        const requests = await t.sql<{ id: number; workspace_id: number; worker_id: number | null }>(
          'select id, workspace_id, worker_id from work_request order by id',
        );
        const groups = await t.sql<{ id: number; scope_id: number; workspace_id: number | null }>(
          'select id, scope_id, workspace_id from user_group order by id',
        );
        const rules = await t.sql<{ id: number; workspace_id: number | null }>(
          'select id, workspace_id from task_rule order by id',
        );
        const workers = await t.sql<{ id: number }>('select id from worker order by id');
        for (const p of principals(d)) {
          const a = await loadAudience(t.app.orm.em.fork(), p);
          const label = JSON.stringify(p);
          expect(await kept('workspace', (x) => workspaceSql(p, x)), label).toEqual(
            workspaces.filter((w) => canSeeWorkspace(a, facts.get(w.id)!)).map((w) => w.id),
          );
          expect(await kept('work_request', (x) => workRequestSql(p, x)), label).toEqual(
            requests
              .filter((r) => canSeeWorkRequest(a, { workspace: facts.get(r.workspace_id)!, workerId: r.worker_id }))
              .map((r) => r.id),
          );
          expect(await kept('user_group', (x) => groupSql(p, x)), label).toEqual(
            groups
              .filter((g) =>
                canSeeGroup(a, {
                  id: g.id,
                  workspace: g.workspace_id === null ? null : facts.get(g.workspace_id)!,
                  scopeWorkspaces: workspaces.filter((w) => w.scope_id === g.scope_id).map((w) => facts.get(w.id)!),
                }),
              )
              .map((g) => g.id),
          );
          expect(await kept('task_rule', (x) => ruleSql(p, x)), label).toEqual(
            rules
              .filter((r) => canSeeRule(a, { workspace: r.workspace_id === null ? null : facts.get(r.workspace_id)! }))
              .map((r) => r.id),
          );
          expect(await kept('worker', (x) => workerDetailsSql(p, x)), label).toEqual(
            workers.filter((w) => canSeeWorkerDetails(p, w)).map((w) => w.id),
          );
        }
      }),
      { numRuns: 25 },
    );
  }, 180_000); // each run writes a directory and asks a hundred statements: slow on a loaded machine
});
