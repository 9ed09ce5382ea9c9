import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { asFilter } from '../../storage/db/condition.js';
import { TaskRuleSchema, type TaskRule } from '../../storage/entities/task-rule.js';
import type { Workspace } from '../../storage/entities/workspace.js';
import { ERROR_CODES, ForbiddenError, InputError, NotFoundError } from '../../core/errors.js';
import { LIST_MAXIMA } from '../input/list-maxima.js';
import { parseExpression } from '../../core/tags/expression.js';
import type { InputConfig } from '../../core/config/input.js';
import { givenFigures, type PartialResources } from '../../core/tasks/resource-request.js';
import { checkResourceInput } from '../input/resource-input.js';
import { isAdmin, requireUser, type Viewer } from '../identity/auth.js';
import { findWorkspace, roleIn } from '../identity/directory.js';
import { principalOf, ruleSql } from '../identity/visibility.js';
import { checkTags, nameSchema, parseInput } from '../input/validate.js';
import { creating } from '../input/flush.js';

/** Input of a workspace or site task rule. */
export interface TaskRuleInput {
  workspace?: string | null;
  name: string;
  taskName?: string | null;
  expression?: string | null;
  providedTags?: string[] | null;
  requiredTags?: string[] | null;
  /** What the requests it matches reserve of a worker that shares its resources (core/tasks/resource-request.ts). */
  resources?: PartialResources | null;
}

/**
 * The workspace whose rules the viewer changes (null: the site's), once the viewer may: admins and
 * the workspace's owners for a workspace, admins for the site. One check for adding and removing.
 */
async function ruleHolder(
  em: EntityManager,
  viewer: Viewer,
  workspaceName: string | null | undefined,
): Promise<Workspace | null> {
  requireUser(viewer);
  const workspace = workspaceName ? await findWorkspace(em, viewer, workspaceName, 'input.workspace') : null;
  if (workspace ? !isAdmin(viewer) && (await roleIn(em, viewer, workspace)) !== 'owner' : !isAdmin(viewer)) {
    throw new ForbiddenError(
      workspace ? 'only admins and workspace owners may change workspace rules' : 'only admins may change site rules',
    );
  }
  return workspace;
}

/**
 * Creates a task rule: with a workspace it is that workspace's rule (admins and owners), without one a
 * site rule (admins). The expression and tags are checked now, so that a rule never breaks analysis later.
 */
export async function createTaskRule(
  em: EntityManager,
  viewer: Viewer,
  config: InputConfig,
  input: TaskRuleInput,
): Promise<TaskRule> {
  const workspace = await ruleHolder(em, viewer, input.workspace);
  const name = parseInput(nameSchema, input.name, 'input.name');
  if (input.taskName != null) parseInput(nameSchema, input.taskName, 'input.taskName');
  const expression = input.expression?.trim() || null;
  if (expression) {
    const parsed = parseExpression(expression);
    if (!parsed.ok) {
      throw new InputError(ERROR_CODES.INVALID_RULE, `input.expression: ${parsed.error.message}`, 'input.expression');
    }
  }
  const providedTags = input.providedTags ?? [];
  const requiredTags = input.requiredTags ?? [];
  checkTags(
    [providedTags, 'provided', 'input.providedTags', config.maxTagsPerSet],
    [requiredTags, 'required', 'input.requiredTags', config.maxTagsPerSet],
  );
  checkResourceInput(input.resources, 'input.resources', ERROR_CODES.INVALID_RULE);
  const resources = input.resources ? givenFigures(input.resources) : null;
  const hasResources = resources !== null && Object.keys(resources).length > 0;
  if (!providedTags.length && !requiredTags.length && !hasResources) {
    throw new InputError(
      ERROR_CODES.INVALID_RULE,
      'input: a rule must add at least one provided or required tag, or resources',
      'input',
    );
  }
  // One transaction: the workspace's row orders concurrent additions (site rules, added by admins
  // alone and seldom, lock the table against other writers), so that the count of rules holds until the
  // new one is committed.
  return em.transactional(async (tx) => {
    if (workspace) await tx.execute('select id from workspace where id = ? for update', [workspace.id]);
    else await tx.execute('lock table task_rule in share row exclusive mode');
    if ((await tx.count(TaskRuleSchema, { workspace })) >= LIST_MAXIMA.rulesPerWorkspace) {
      throw new InputError(
        ERROR_CODES.INVALID_RULE,
        `input: ${workspace ? 'a workspace' : 'the site'} holds at most ${LIST_MAXIMA.rulesPerWorkspace} rules`,
        'input',
      );
    }
    if (await tx.count(TaskRuleSchema, { workspace, name })) {
      throw new InputError(ERROR_CODES.INVALID_RULE, `input.name: a rule "${name}" already exists there`, 'input.name');
    }
    const rule = tx.create(TaskRuleSchema, {
      workspace,
      name,
      taskName: input.taskName ?? null,
      expression,
      providedTags,
      requiredTags,
      resources: hasResources ? resources : null,
    });
    await creating(`a rule "${name}"`, () => tx.flush());
    return rule;
  });
}

/**
 * Deletes a task rule of a workspace (admins and owners) or, without workspace, of the site (admins).
 * Work requests already created keep the tags the rule gave them; new ones no longer get them.
 */
export async function deleteTaskRule(
  em: EntityManager,
  viewer: Viewer,
  input: { workspace?: string | null; name: string },
): Promise<TaskRule> {
  const workspace = await ruleHolder(em, viewer, input.workspace);
  const rule = await em.findOne(TaskRuleSchema, { workspace, name: input.name });
  if (!rule)
    throw new NotFoundError(
      `input.name: no rule "${input.name}" ${workspace ? `in "${input.workspace}"` : 'of the site'}`,
      'input.name',
    );
  em.remove(rule);
  await em.flush();
  return rule;
}

/** The rules of these workspaces that the viewer may see, by name (one statement for all). */
export function workspaceRules(
  em: EntityManager,
  viewer: Viewer,
  workspaceIds: readonly number[],
): Promise<TaskRule[]> {
  const principal = principalOf(viewer);
  const where: FilterQuery<TaskRule>[] = [
    { workspace: { $in: [...workspaceIds] } },
    asFilter((alias) => ruleSql(principal, alias)),
  ];
  return em.find(TaskRuleSchema, { $and: where }, { orderBy: { name: 'asc' } });
}

/** The rules of the site (those of no workspace) that the viewer may see, by name (one statement). */
export function siteRules(em: EntityManager, viewer: Viewer): Promise<TaskRule[]> {
  const principal = principalOf(viewer);
  const where: FilterQuery<TaskRule>[] = [{ workspace: null }, asFilter((alias) => ruleSql(principal, alias))];
  return em.find(TaskRuleSchema, { $and: where }, { orderBy: { name: 'asc' } });
}
