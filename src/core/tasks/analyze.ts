/**
 * The analysis of one work request, from its input to its two frozen tag sets (docs/design.md: work requests):
 * validate, add the system tags, the task's own tags, the user's tags, then the task rules.
 * All-or-nothing: any error a client or an admin must fix fails the whole analysis, so that a
 * request never becomes schedulable half-tagged; only rule tags refused by provenance are dropped.
 */
import { evaluateExpression, parseExpression } from '../tags/expression.js';
import type { TagExpression } from '../tags/expression.js';
import { parseTag } from '../tags/syntax.js';
import { TagSetBuilder, isRefusal } from '../tags/tag-set.js';
import { PROVENANCES, REFUSAL_CODES } from '../tags/types.js';
import type { Provenance, TagEntry, TagRefusal } from '../tags/types.js';
import { learnedRequiredTags, type LearnedHistory } from './learned-requirements.js';
import { TASKS, findTask } from './registry.js';
import {
  resolveResourceRequest,
  resourceInputProblems,
  type PartialResources,
  type ResourceRequest,
} from './resource-request.js';
import { statisticsKeyOf } from './statistics-key.js';
import { describeTaskDataIssues } from './task-data-issues.js';
import { TASK_TYPES, UNASSIGNABLE_TASK_TYPES } from './types.js';
import type { EnvironmentFacts, TaskDefinition, TaskTag, TaskTags } from './types.js';

/** A task configuration rule of a workspace (or of the site): when it applies, which tags it adds. */
export interface TaskRule {
  name: string;
  /** Applies to tasks of this name only; null for every task. */
  taskName: string | null;
  /** A boolean tag expression over the pre-rule tag set; null to apply unconditionally. */
  expression: string | null;
  providedTags: string[];
  requiredTags: string[];
  /** What a matching request reserves of a worker that shares its resources (core/tasks/resource-request.ts); null or absent for nothing. */
  resources?: PartialResources | null;
}

/** Stable codes of the errors that stop an analysis. */
export const ANALYSIS_ERROR_CODES = [
  'UNKNOWN_TASK',
  'INVALID_TASK_DATA',
  'INVALID_TAG',
  'TAG_NOT_ALLOWED',
  'INVALID_RULE',
  'UNKNOWN_ENVIRONMENT',
] as const;
/** One of {@link ANALYSIS_ERROR_CODES}. */
export type AnalysisErrorCode = (typeof ANALYSIS_ERROR_CODES)[number];

/** Why an analysis failed, with the input field (`taskData.host_architecture`, `providedTags[0]`) or tag to fix. */
export interface AnalysisError {
  code: AnalysisErrorCode;
  message: string;
  path?: string;
  tag?: string;
}

/** Everything the analysis of one work request depends on, already loaded from the database. */
export interface WorkRequestAnalysisInput {
  scope: string;
  workspace: string;
  creatorGroups: readonly { scope: string; workspace: string | null; name: string }[];
  taskType: string;
  taskName: string;
  taskData: unknown;
  /** The environment the taskData names, or null when it names none or it does not exist. */
  environment: EnvironmentFacts | null;
  defaultArchitecture: string;
  userProvidedTags: readonly string[];
  userRequiredTags: readonly string[];
  /** Prefixes the workspace lets its members provide (empty by default). */
  userProvidablePrefixes: readonly string[];
  workspaceRules: readonly TaskRule[];
  siteRules: readonly TaskRule[];
  /**
   * The source of the tags derived from the taskData and its environment, when someone other than the
   * user wrote that data: `workflow:ID` for a workflow's child. Null keeps `task-data:FIELD` and `environment:ID`.
   */
  dataSource?: string | null;
  /**
   * Where the site learns requirements (core/tasks/learned-requirements.ts): the history of the request's
   * task, source package and architecture, read beforehand. A history of another key adds nothing.
   */
  learned?: LearnedHistory | null;
  /** The resources the user asked for (createWorkRequest's `resources`), checked at input; null for none. */
  userResources?: PartialResources | null;
}

/** The two tag sets of a work request, or every error that prevented computing them. */
export type WorkRequestAnalysis =
  | {
      ok: true;
      provided: TagEntry[];
      required: TagEntry[];
      providedTags: string[];
      requiredTags: string[];
      dropped: TagRefusal[];
      /** What it reserves of a worker that shares its resources, with each figure's source (core/tasks/resource-request.ts). */
      resources: ResourceRequest;
    }
  | { ok: false; errors: AnalysisError[] };

/** The result of {@link validateTaskInput}. */
export type TaskInputValidation =
  { ok: true; task: TaskDefinition; data: unknown; environmentId: number | null } | { ok: false; error: AnalysisError };

/** Finds the task and validates its taskData, so a client learns every bad field in one answer. */
export function validateTaskInput(taskType: string, taskName: string, taskData: unknown): TaskInputValidation {
  const task = findTask(taskType, taskName);
  if (task === undefined) return { ok: false, error: unknownTask(taskType, taskName) };
  const parsed = task.schema.safeParse(taskData);
  if (!parsed.success) {
    const problems = describeTaskDataIssues(parsed.error.issues);
    return {
      ok: false,
      error: {
        code: 'INVALID_TASK_DATA',
        message: problems.map((p) => `${p.path}: ${p.text}`).join('; '),
        path: problems[0]?.path ?? 'taskData',
      },
    };
  }
  return { ok: true, task, data: parsed.data, environmentId: task.environmentId(parsed.data) };
}

/** Computes the frozen tag sets of a work request, or all the errors that make it unschedulable. */
export function analyzeWorkRequest(input: WorkRequestAnalysisInput): WorkRequestAnalysis {
  const errors: AnalysisError[] = [];
  const validation = validateTaskInput(input.taskType, input.taskName, input.taskData);
  if (!validation.ok) errors.push(validation.error);
  const taskTags = validation.ok ? analyzeTask(validation, input, errors) : null;

  // Tags are checked even when the task is not, so that one answer names everything to fix.
  const provided = new TagSetBuilder('task-provided', { userProvidablePrefixes: input.userProvidablePrefixes });
  const required = new TagSetBuilder('task-required');
  for (const t of [...contextProvidedTags(input), ...(taskTags?.provided ?? [])]) addSystemTag(provided, t, errors);
  for (const t of taskTags?.required ?? []) addSystemTag(required, t, errors);
  input.userProvidedTags.forEach((tag, i) => addUserTag(provided, tag, `providedTags[${i}]`, errors));
  input.userRequiredTags.forEach((tag, i) => addUserTag(required, tag, `requiredTags[${i}]`, errors));
  const rules = [
    ...compileRules(input.workspaceRules, 'workspace', input.taskName, errors),
    ...compileRules(input.siteRules, 'site', input.taskName, errors),
  ];
  if (taskTags === null || errors.length > 0) return { ok: false, errors };

  // Every rule sees the same pre-rule set, so the result does not depend on the order of the rules.
  const preRule = new Set([...provided.tags(), ...required.tags()]);
  const applied: CompiledRule[] = [];
  for (const rule of rules) {
    if (rule.expression !== null && !evaluateExpression(rule.expression, preRule)) continue;
    applied.push(rule);
    provided.addAll(rule.providedTags, rule.provenance, rule.source);
    required.addAll(rule.requiredTags, rule.provenance, rule.source);
  }
  // Learned minimums come after the rules, which do not see them: history does not decide a rule.
  // A `>=` tag is never refused for another minimum of the same name: the match requires each, so the
  // higher one (the user's, a rule's or the history's) is what binds.
  const key = statisticsKeyOf(input.taskType, input.taskName, provided.entries(), required.entries());
  for (const t of learnedRequiredTags(key, input.learned)) required.add(t.tag, 'system', t.source);
  // Nothing was refused before the rules (that fails the analysis), so every refusal now is a
  // rule's tag, or an earlier valued tag that a more trusted rule overrode.
  const dropped = [...provided.refusals(), ...required.refusals()];

  const providedEntries = sortEntries(provided.entries());
  const requiredEntries = sortEntries(required.entries());
  const figures = (kind: CompiledRule['kind']) =>
    applied.filter((r) => r.kind === kind && r.resources).map((r) => ({ source: r.source, resources: r.resources! }));
  const resources = resolveResourceRequest({
    user: input.userResources,
    workspaceRules: figures('workspace'),
    siteRules: figures('site'),
    key,
    learned: input.learned,
  });
  return {
    ok: true,
    provided: providedEntries,
    required: requiredEntries,
    providedTags: uniqueTags(providedEntries),
    requiredTags: uniqueTags(requiredEntries),
    dropped: sortEntries(dropped),
    resources,
  };
}

function unknownTask(taskType: string, taskName: string): AnalysisError {
  if (!(TASK_TYPES as readonly string[]).includes(taskType)) {
    return {
      code: 'UNKNOWN_TASK',
      message: `unknown task type "${taskType}"; known types: ${TASK_TYPES.join(', ')}`,
      path: 'taskType',
    };
  }
  const known = TASKS.filter((t) => t.type === taskType)
    .map((t) => t.name)
    .sort();
  return {
    code: 'UNKNOWN_TASK',
    message: `unknown ${taskType} task "${taskName}"; known ${taskType} tasks: ${known.join(', ')}`,
    path: 'taskName',
  };
}

/** The task's own tags plus the registry's, or null (with the error) when its environment is unknown. */
function analyzeTask(
  validation: Extract<TaskInputValidation, { ok: true }>,
  input: WorkRequestAnalysisInput,
  errors: AnalysisError[],
): TaskTags | null {
  const { task, data, environmentId } = validation;
  if (environmentId !== null && input.environment?.id !== environmentId) {
    errors.push({
      code: 'UNKNOWN_ENVIRONMENT',
      message: `environment ${environmentId} does not exist`,
      path: 'taskData.environment_id',
    });
    return null;
  }
  // An environment the data does not name must not sway the analysis.
  const environment = environmentId === null ? null : input.environment;
  const own = task.analyze(data, { environment, defaultArchitecture: input.defaultArchitecture });
  const attribute = (tags: TaskTag[]) =>
    input.dataSource ? tags.map((t) => (FROM_DATA.test(t.source) ? { ...t, source: input.dataSource! } : t)) : tags;
  return { provided: attribute(own.provided), required: [...registryRequiredTags(task), ...attribute(own.required)] };
}

/** The sources of a task's own tags that come from its taskData (and the environment it names). */
const FROM_DATA = /^(task-data:|environment:)/;

interface CompiledRule {
  kind: 'workspace' | 'site';
  provenance: Provenance;
  source: string;
  expression: TagExpression | null;
  providedTags: readonly string[];
  requiredTags: readonly string[];
  resources: PartialResources | null;
}

/**
 * Rules for other task names cannot apply, so only the rules that may apply to this task must be
 * valid; a broken one of those fails the request, since nobody can tell what it would have added.
 */
function compileRules(
  rules: readonly TaskRule[],
  kind: 'workspace' | 'site',
  taskName: string,
  errors: AnalysisError[],
): CompiledRule[] {
  const compiled: CompiledRule[] = [];
  for (const rule of rules) {
    if (rule.taskName !== null && rule.taskName !== taskName) continue;
    const label = `${kind} rule "${rule.name}"`;
    let ok = true;
    let expression: TagExpression | null = null;
    if (rule.expression !== null) {
      const parsed = parseExpression(rule.expression);
      if (parsed.ok) expression = parsed.expression;
      else {
        ok = false;
        errors.push({
          code: 'INVALID_RULE',
          message: `${label}: expression does not parse at position ${parsed.error.position}: ${parsed.error.message}`,
        });
      }
    }
    for (const [side, tags] of [
      ['provided', rule.providedTags],
      ['required', rule.requiredTags],
    ] as const) {
      for (const tag of tags) {
        const parsed = parseTag(tag, side);
        if (parsed.ok) continue;
        ok = false;
        errors.push({ code: 'INVALID_RULE', message: `${label}: ${parsed.error.message}`, tag });
      }
    }
    for (const problem of resourceInputProblems(rule.resources, 'resources')) {
      ok = false;
      errors.push({ code: 'INVALID_RULE', message: `${label}: ${problem.path} ${problem.message}` });
    }
    if (ok) {
      compiled.push({
        kind,
        resources: rule.resources ?? null,
        provenance: kind === 'workspace' ? 'workspace' : 'system',
        source: `${kind}-rule:${rule.name}`,
        expression,
        providedTags: rule.providedTags,
        requiredTags: rule.requiredTags,
      });
    }
  }
  return compiled;
}

function contextProvidedTags(input: WorkRequestAnalysisInput): TaskTag[] {
  return [
    { tag: `task:scope:${input.scope}`, source: 'workspace' },
    { tag: `task:workspace:${input.scope}:${input.workspace}`, source: 'workspace' },
    ...input.creatorGroups.map((g) => ({
      tag: `task:group:${g.scope}:${g.workspace ?? ''}:${g.name}`,
      source: `group:${g.name}`,
    })),
  ];
}

function registryRequiredTags(task: TaskDefinition): TaskTag[] {
  if (UNASSIGNABLE_TASK_TYPES.includes(task.type)) {
    return [{ tag: 'worker:type:not-assignable', source: 'task-registry' }];
  }
  return [
    { tag: `worker:type:${task.type}`, source: 'task-registry' },
    { tag: `worker:task:${task.type}:${task.name}:version:${task.version}`, source: 'task-registry' },
  ];
}

/** A refused system tag comes from data nobody checked as a tag (a group name with a space): fail, do not drop. */
function addSystemTag(builder: TagSetBuilder, t: TaskTag, errors: AnalysisError[]): void {
  const result = builder.add(t.tag, 'system', t.source);
  if (isRefusal(result)) errors.push({ code: 'INVALID_TAG', message: `${t.source}: ${result.message}`, tag: t.tag });
}

function addUserTag(builder: TagSetBuilder, tag: string, path: string, errors: AnalysisError[]): void {
  const result = builder.add(tag, 'user', 'user-input');
  if (!isRefusal(result)) return;
  const code = result.code === REFUSAL_CODES.INVALID_SYNTAX ? 'INVALID_TAG' : 'TAG_NOT_ALLOWED';
  errors.push({ code, message: result.message, path, tag });
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sorted by code unit, not locale, so that stored sets compare equal on every machine; duplicates go. */
function sortEntries<T extends TagEntry>(entries: readonly T[]): T[] {
  const seen = new Set<string>();
  return [...entries]
    .sort(
      (a, b) =>
        compareText(a.tag, b.tag) ||
        PROVENANCES.indexOf(a.provenance) - PROVENANCES.indexOf(b.provenance) ||
        compareText(a.source, b.source),
    )
    .filter((e) => {
      const key = JSON.stringify(Object.entries(e).sort(([k1], [k2]) => compareText(k1, k2)));
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
}

function uniqueTags(entries: readonly TagEntry[]): string[] {
  return [...new Set(entries.map((e) => e.tag))];
}
