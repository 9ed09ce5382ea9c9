import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../core/config/config.js';
import { EnvironmentSchema } from '../../storage/entities/environment.js';
import { TaskRuleSchema } from '../../storage/entities/task-rule.js';
import type { User } from '../../storage/entities/user.js';
import type { Workspace } from '../../storage/entities/workspace.js';
import { keyString, readLearnedSources } from '../../scheduler/storage/task-statistics.js';
import {
  analyzeWorkRequest,
  type TaskRule,
  type WorkRequestAnalysis,
  type WorkRequestAnalysisInput,
} from '../../core/tasks/analyze.js';
import type { PartialResources } from '../../core/tasks/resource-request.js';
import { learnedHistoryOf, type LearnedHistory } from '../../core/tasks/learned-requirements.js';
import { statisticsKeyOf, type StatisticsKey } from '../../core/tasks/statistics-key.js';
import type { EnvironmentFacts } from '../../core/tasks/types.js';
import { principalOf, workspaceSql } from '../identity/visibility.js';
import { jsonKey } from '../input/validate.js';

/** The sections a request's analysis reads: the default architecture, and whether and how it learns requirements from the run history. */
export type AnalysisConfig = Pick<Config, 'tags' | 'statistics'>;

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
  /** The resources the user asked for (see WorkRequestAnalysisInput.userResources). */
  userResources?: PartialResources | null;
}

const toRule = (r: RuleRow): TaskRule => ({
  name: r.name,
  taskName: r.taskName ?? null,
  expression: r.expression ?? null,
  providedTags: r.providedTags,
  requiredTags: r.requiredTags,
  resources: r.resources ?? null,
});

type GroupRow = { name: string; workspace: string | null };
type RuleRow = {
  name: string;
  taskName?: string | null;
  expression?: string | null;
  providedTags: string[];
  requiredTags: string[];
  resources?: PartialResources | null;
  workspace?: unknown;
};

/**
 * The rows analyses read besides the request itself (the creator's groups in a scope, the rules of a
 * workspace and the site, environments), each loaded once however many analyses ask: the requests of
 * one batch share them. One instance per operation; it holds what it read at that time. So do the
 * analyses themselves: requests that are the same but for nothing the analysis reads (a batch of
 * identical requests) are analysed once, and share that result (analyzeRequest).
 */
export class AnalysisSources {
  private readonly groups = new Map<string, Promise<GroupRow[]>>();
  private readonly rules = new Map<number, Promise<RuleRow[]>>();
  private readonly environments = new Map<number, Promise<EnvironmentFacts | null>>();
  private readonly histories = new Map<string, Promise<LearnedHistory | null>>();
  private readonly analyses = new Map<string, Promise<WorkRequestAnalysis>>();

  constructor(private readonly em: EntityManager) {}

  /** The analysis of the request `key` names, run by `run` the first time it is asked for (no key: every time). */
  analysis(key: string | null, run: () => Promise<WorkRequestAnalysis>): Promise<WorkRequestAnalysis> {
    if (key === null) return run();
    let found = this.analyses.get(key);
    if (!found) {
      found = run();
      this.analyses.set(key, found);
    }
    return found;
  }

  groupsOf(creatorId: number, scopeId: number): Promise<GroupRow[]> {
    const key = `${creatorId}:${scopeId}`;
    let found = this.groups.get(key);
    if (!found) {
      found = this.em.execute<GroupRow[]>(
        `select g.name, w.name as workspace
           from user_group g
           join user_group_member m on m.group_id = g.id
           left join workspace w on w.id = g.workspace_id
          where m.user_id = ? and g.scope_id = ?
          order by g.name, w.name`,
        [creatorId, scopeId],
      );
      this.groups.set(key, found);
    }
    return found;
  }

  rulesOf(workspace: Workspace): Promise<RuleRow[]> {
    let found = this.rules.get(workspace.id);
    if (!found) {
      found = this.em.find(TaskRuleSchema, { $or: [{ workspace }, { workspace: null }] }, { orderBy: { id: 'asc' } });
      this.rules.set(workspace.id, found);
    }
    return found;
  }

  environment(id: number): Promise<EnvironmentFacts | null> {
    let found = this.environments.get(id);
    if (!found) {
      found = this.em.findOne(EnvironmentSchema, { id }).then((e) =>
        e
          ? {
              id: e.id,
              codename: e.codename,
              architecture: e.architecture,
              variant: e.variant ?? null,
              backend: e.backend ?? null,
            }
          : null,
      );
      this.environments.set(id, found);
    }
    return found;
  }

  /**
   * The history of a task, package and architecture over the statistics' window, for learned minimums:
   * the runs of the workspace `workspaceId` and of public workspaces, or, where the site shares its
   * history (`shared`), every run. Null without runs.
   */
  history(key: StatisticsKey, workspaceId: number, shared: boolean): Promise<LearnedHistory | null> {
    const k = `${keyString(key)}:${shared ? 'shared' : workspaceId}`;
    let found = this.histories.get(k);
    if (!found) {
      found = readLearnedSources(
        this.em,
        key,
        shared ? null : (alias) => historyWorkspacesSql(workspaceId, alias),
      ).then((figures) => (figures.memory || figures.disk ? learnedHistoryOf(key, figures) : null));
      this.histories.set(k, found);
    }
    return found;
  }
}

/**
 * The workspaces whose runs a request of workspace `workspaceId` learns from, over the `workspace` row
 * `alias`: its own, and those anybody may see (the public ones, by visibility.ts's rule for an anonymous
 * caller). Its submitter may see those runs, and so may whoever may see the request and its tags; the
 * submitter's other private workspaces do not count, since the request's tags would show their runs to
 * that audience.
 */
function historyWorkspacesSql(workspaceId: number, alias: string) {
  const visibleToAll = workspaceSql(principalOf({ kind: 'anonymous' }), alias);
  return { sql: `(${alias}.id = ? or ${visibleToAll.sql})`, params: [workspaceId, ...visibleToAll.params] };
}

/**
 * Loads what the pure analysis needs (creator groups in the workspace's scope, workspace and site
 * rules, the environment) through `sources` (a new one unless the caller shares one) and runs it.
 * Where the site learns requirements (TAGSCHED_LEARNED_REQUIREMENTS), the analysis runs again with the
 * history of the key its first run derived (its task, source package and architecture), when there is
 * one: the runs of its own workspace and public ones, or every run where the site shares its history
 * (TAGSCHED_SHARED_HISTORY). Reads only; the caller stores the result.
 */
export function analyzeRequest(
  em: EntityManager,
  config: AnalysisConfig,
  req: AnalysisRequest,
  sources = new AnalysisSources(em),
): Promise<WorkRequestAnalysis> {
  // Everything the analysis reads: the request's own fields, and ids that name what the sources read
  // (the same for the life of the sources). A taskData that JSON does not write exactly has no key.
  const data = jsonKey(req.taskData);
  const key =
    data === null
      ? null
      : `${JSON.stringify([
          req.workspace.id,
          req.workspace.scope.id,
          req.workspace.providableTagPrefixes,
          req.creator.id,
          req.taskType,
          req.taskName,
          req.environmentId,
          req.userProvidedTags,
          req.userRequiredTags,
          req.dataSource ?? null,
          req.userResources ?? null,
          config.tags.defaultArchitecture,
          config.statistics.learnedRequirements,
          config.statistics.sharedHistory,
        ])}${data}`;
  return sources.analysis(key, () => runAnalysis(config, req, sources));
}

async function runAnalysis(
  config: AnalysisConfig,
  req: AnalysisRequest,
  sources: AnalysisSources,
): Promise<WorkRequestAnalysis> {
  const scope = req.workspace.scope;
  const [groups, rules, facts] = await Promise.all([
    sources.groupsOf(req.creator.id, scope.id),
    sources.rulesOf(req.workspace),
    req.environmentId === null ? null : sources.environment(req.environmentId),
  ]);
  const input: WorkRequestAnalysisInput = {
    scope: scope.name,
    workspace: req.workspace.name,
    creatorGroups: groups.map((g) => ({ scope: scope.name, workspace: g.workspace, name: g.name })),
    taskType: req.taskType,
    taskName: req.taskName,
    taskData: req.taskData,
    environment: facts,
    defaultArchitecture: config.tags.defaultArchitecture,
    userProvidedTags: req.userProvidedTags,
    userRequiredTags: req.userRequiredTags,
    userProvidablePrefixes: req.workspace.providableTagPrefixes,
    workspaceRules: rules.filter((r) => r.workspace).map(toRule),
    siteRules: rules.filter((r) => !r.workspace).map(toRule),
    dataSource: req.dataSource ?? null,
    userResources: req.userResources ?? null,
  };
  const analysis = analyzeWorkRequest(input);
  if (!config.statistics.learnedRequirements || !analysis.ok) return analysis;
  const learned = await sources.history(
    statisticsKeyOf(req.taskType, req.taskName, analysis.provided, analysis.required),
    req.workspace.id,
    config.statistics.sharedHistory,
  );
  return learned ? analyzeWorkRequest({ ...input, learned }) : analysis;
}
