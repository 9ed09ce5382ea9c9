/**
 * What a work request reserves of a worker that shares its resources (docs/reference/resources.md):
 * whole CPUs, memory and disk in MiB. Each figure is resolved on its own, once, when the request's
 * tags are frozen, from the first of these that gives it:
 *
 * 1. the user's input (createWorkRequest's `resources`), within {@link RESOURCE_LIMITS};
 * 2. the workspace's task rules that apply (the highest figure among them), then the site's;
 * 3. the learned requirements of the statistics (core/tasks/learned-requirements.ts): the 95th
 *    percentile of the task, package and architecture's peak memory and disk, with its headroom;
 * 4. the task's default ({@link TASK_DEFAULT_RESOURCES}).
 *
 * Each figure keeps its source, as a tag keeps its provenance: `user`, `workspace-rule:NAME`,
 * `site-rule:NAME`, `history:TASK:PACKAGE:ARCH`, `task-default`. Pure: the analysis
 * (core/tasks/analyze.ts) calls it; the scheduler's fit (scheduler/rules/resources.ts) reads the result.
 */
import { LEARNED_HEADROOM, LEARNED_MIN_RUNS, learnedSource, type LearnedHistory } from './learned-requirements.js';
import { sameStatisticsKey, type StatisticsKey } from './statistics-key.js';

/** What a worker offers, or a request reserves: whole CPUs, memory and disk in MiB (integers, never negative). */
export interface Resources {
  readonly cpus: number;
  readonly memoryMib: number;
  readonly diskMib: number;
}

/** The figures of {@link Resources}, in the order every list of them follows. */
export const RESOURCE_FIGURES = ['cpus', 'memoryMib', 'diskMib'] as const;
export type ResourceFigure = (typeof RESOURCE_FIGURES)[number];

/** Nothing: what a request that asks for no resources reserves. */
export const NO_RESOURCES: Resources = Object.freeze({ cpus: 0, memoryMib: 0, diskMib: 0 });

/** The most one request may ask for, per figure: 1,024 CPUs, 4 TiB of memory, 64 TiB of disk (int4 columns). */
export const RESOURCE_LIMITS: Resources = Object.freeze({
  cpus: 1024,
  memoryMib: 4 * 1024 * 1024,
  diskMib: 64 * 1024 * 1024,
});

/** What a request reserves when nothing else says: one CPU, 1 GiB of memory and 1 GiB of disk. */
export const TASK_DEFAULT_RESOURCES: Resources = Object.freeze({ cpus: 1, memoryMib: 1024, diskMib: 1024 });

/** Where each figure of a request's resources came from. */
export type ResourceSources = { readonly [F in ResourceFigure]: string };

/** A request's resources with the source of each figure. */
export interface ResourceRequest {
  readonly resources: Resources;
  readonly sources: ResourceSources;
}

/** Some figures, as a user or a rule gives them: each may be left out. */
export type PartialResources = { readonly [F in ResourceFigure]?: number | null };

/** A rule's figures with the rule's source (`workspace-rule:NAME`, `site-rule:NAME`). */
export interface ResourceRuleFigures {
  readonly source: string;
  readonly resources: PartialResources;
}

/** Everything a resolution depends on. */
export interface ResourceRequestInput {
  readonly user?: PartialResources | null;
  /** The workspace's rules that apply to the request, then the site's (any order within each). */
  readonly workspaceRules?: readonly ResourceRuleFigures[];
  readonly siteRules?: readonly ResourceRuleFigures[];
  /** The request's statistics key and the history read for it; a history of another key adds nothing. */
  readonly key?: StatisticsKey | null;
  readonly learned?: LearnedHistory | null;
  readonly taskDefault?: Resources;
}

const MIB = 1024 * 1024;

/** A figure of a rule or of the user, when it is one: a whole number from 0 to its limit. */
const given = (value: number | null | undefined, figure: ResourceFigure): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= RESOURCE_LIMITS[figure];

/** The highest figure the rules give, with the source of the first rule that gives it. */
function fromRules(
  rules: readonly ResourceRuleFigures[],
  figure: ResourceFigure,
): { value: number; source: string } | null {
  let best: { value: number; source: string } | null = null;
  for (const rule of rules) {
    const value = rule.resources[figure];
    if (given(value, figure) && (best === null || value > best.value)) best = { value, source: rule.source };
  }
  return best;
}

/** The learned figure in MiB (its 95th percentile with the learned headroom, rounded up), or null. */
function fromHistory(input: ResourceRequestInput, figure: ResourceFigure): { value: number; source: string } | null {
  if (figure === 'cpus' || !input.learned || !input.key) return null;
  const k = input.key;
  if (!sameStatisticsKey(k, input.learned.key)) return null;
  const learned = figure === 'memoryMib' ? input.learned.memory : input.learned.disk;
  if (!learned || learned.count < LEARNED_MIN_RUNS) return null;
  const value = Math.min(RESOURCE_LIMITS[figure], Math.ceil((learned.p95 * LEARNED_HEADROOM) / MIB));
  return Number.isFinite(value) && value > 0 ? { value, source: learnedSource(k) } : null;
}

/** Resolves each figure by the order of precedence in this module's comment. */
export function resolveResourceRequest(input: ResourceRequestInput): ResourceRequest {
  const taskDefault = input.taskDefault ?? TASK_DEFAULT_RESOURCES;
  const resolved = {} as Record<ResourceFigure, { value: number; source: string }>;
  for (const figure of RESOURCE_FIGURES) {
    const user = input.user?.[figure];
    resolved[figure] = (given(user, figure) ? { value: user, source: 'user' } : null) ??
      fromRules(input.workspaceRules ?? [], figure) ??
      fromRules(input.siteRules ?? [], figure) ??
      fromHistory(input, figure) ?? { value: taskDefault[figure], source: 'task-default' };
  }
  return {
    resources: { cpus: resolved.cpus.value, memoryMib: resolved.memoryMib.value, diskMib: resolved.diskMib.value },
    sources: { cpus: resolved.cpus.source, memoryMib: resolved.memoryMib.source, diskMib: resolved.diskMib.source },
  };
}

/**
 * The problems of a user's or a rule's figures, each with its path under `path` (`resources.cpus`):
 * a figure must be a whole number from 0 to its limit. None when every given figure is one.
 */
export function resourceInputProblems(
  figures: PartialResources | null | undefined,
  path: string,
): { path: string; message: string }[] {
  if (!figures) return [];
  return RESOURCE_FIGURES.flatMap((figure) => {
    const value = figures[figure];
    if (value == null || given(value, figure)) return [];
    return [{ path: `${path}.${figure}`, message: `must be a whole number from 0 to ${RESOURCE_LIMITS[figure]}` }];
  });
}

/** The figures given, without those left out or null (what is stored of a user's or a rule's input). */
export function givenFigures(given: PartialResources): PartialResources {
  return Object.fromEntries(RESOURCE_FIGURES.flatMap((f) => (given[f] == null ? [] : [[f, given[f]]])));
}
