import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.js';
import { EnvironmentSchema } from '../entities/environment.js';
import { TaskRuleSchema } from '../entities/task-rule.js';
import type { User } from '../entities/user.js';
import type { Workspace } from '../entities/workspace.js';
import { analyzeWorkRequest, type TaskRule, type WorkRequestAnalysis } from '../tasks/analyze.js';
import type { EnvironmentFacts } from '../tasks/types.js';

/** What a work request's analysis reads besides its own fields. */
export interface AnalysisRequest {
  workspace: Workspace;
  creator: User;
  taskType: string;
  taskName: string;
  taskData: unknown;
  environmentId: number | null;
  userProvidedTags: readonly string[];
  userRequiredTags: readonly string[];
  /** `workflow:ID` for a workflow's child (see WorkRequestAnalysisInput.dataSource). */
  dataSource?: string | null;
}

const toRule = (r: { name: string; taskName?: string | null; expression?: string | null; providedTags: string[]; requiredTags: string[] }): TaskRule => ({
  name: r.name,
  taskName: r.taskName ?? null,
  expression: r.expression ?? null,
  providedTags: r.providedTags,
  requiredTags: r.requiredTags,
});

/**
 * Loads what the pure analysis needs (creator groups in the workspace's scope, workspace and site
 * rules, the environment) and runs it. Reads only; the caller stores the result.
 */
export async function analyzeRequest(em: EntityManager, config: Config, req: AnalysisRequest): Promise<WorkRequestAnalysis> {
  const scope = req.workspace.scope;
  const [groups, rules, environment] = await Promise.all([
    em.execute<{ name: string; workspace: string | null }[]>(
      `select g.name, w.name as workspace
         from user_group g
         join user_group_member m on m.group_id = g.id
         left join workspace w on w.id = g.workspace_id
        where m.user_id = ? and g.scope_id = ?
        order by g.name, w.name`,
      [req.creator.id, scope.id],
    ),
    em.find(TaskRuleSchema, { $or: [{ workspace: req.workspace }, { workspace: null }] }, { orderBy: { id: 'asc' } }),
    req.environmentId === null ? null : em.findOne(EnvironmentSchema, { id: req.environmentId }),
  ]);
  const facts: EnvironmentFacts | null = environment
    ? { id: environment.id, codename: environment.codename, architecture: environment.architecture, variant: environment.variant ?? null, backend: environment.backend ?? null }
    : null;
  return analyzeWorkRequest({
    scope: scope.name,
    workspace: req.workspace.name,
    creatorGroups: groups.map((g) => ({ scope: scope.name, workspace: g.workspace, name: g.name })),
    taskType: req.taskType,
    taskName: req.taskName,
    taskData: req.taskData,
    environment: facts,
    defaultArchitecture: config.defaultArchitecture,
    userProvidedTags: req.userProvidedTags,
    userRequiredTags: req.userRequiredTags,
    userProvidablePrefixes: req.workspace.providableTagPrefixes,
    workspaceRules: rules.filter((r) => r.workspace).map(toRule),
    siteRules: rules.filter((r) => !r.workspace).map(toRule),
    dataSource: req.dataSource ?? null,
  });
}
