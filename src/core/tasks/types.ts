/**
 * The shape every task module fills in: what a task is called, how its taskData is validated,
 * and which tags it contributes. The tags a task returns here always carry provenance `system`.
 */
import type { z } from 'zod';

/** The kinds of task, as stored on a work request (docs/design.md: work requests). */
export const TASK_TYPES = ['worker', 'server', 'signing', 'internal', 'workflow'] as const;
/** One of {@link TASK_TYPES}. */
export type TaskType = (typeof TASK_TYPES)[number];

/**
 * Task types the server orchestrates itself and never hands to a worker, so they require
 * `worker:type:not-assignable`: a synchronization point completes when its dependencies have, a
 * workflow expands into children and completes with them (services/workflows/orchestration.ts).
 */
export const UNASSIGNABLE_TASK_TYPES: readonly TaskType[] = ['internal', 'workflow'];

/** Whether the server runs a task of this type itself (see {@link UNASSIGNABLE_TASK_TYPES}). */
export function isOrchestrated(taskType: string): boolean {
  return (UNASSIGNABLE_TASK_TYPES as readonly string[]).includes(taskType);
}

/** Executor backends a task may ask for; `auto` lets the worker pick its default, `unshare`. */
export const EXECUTOR_BACKENDS = ['auto', 'unshare', 'incus-lxc', 'incus-vm', 'qemu'] as const;
/** One of {@link EXECUTOR_BACKENDS}. */
export type ExecutorBackend = (typeof EXECUTOR_BACKENDS)[number];

/** What the database knows about an environment, enough to pin a task to its architecture. */
export interface EnvironmentFacts {
  id: number;
  codename: string;
  architecture: string;
  variant: string | null;
  backend: string | null;
}

/** Facts from outside taskData that a task's analysis may depend on. */
export interface TaskAnalysisContext {
  /** The environment named by the taskData, already checked to be the one it names; null when none. */
  environment: EnvironmentFacts | null;
  /** The configured architecture for tasks that name none (`amd64` unless configured). */
  defaultArchitecture: string;
}

/** A tag a task contributes, with where in the input it comes from (`task-data:host_architecture`, ...). */
export interface TaskTag {
  tag: string;
  source: string;
}

/** The tags a task's own analysis contributes, all with provenance `system`. */
export interface TaskTags {
  provided: TaskTag[];
  required: TaskTag[];
}

/** What a workflow's expansion may look up, read by the caller beforehand (the expansion stays pure). */
export interface WorkflowContext {
  /** The newest environment of that codename and architecture (and variant, when given), or null. */
  environment(codename: string, architecture: string, variant: string | null): EnvironmentFacts | null;
  /** The architectures that have an environment of that codename (and variant, when given), sorted. */
  architectures(codename: string, variant: string | null): string[];
}

/** One child a workflow creates: a work request of its own, analysed as any other when it becomes PENDING. */
export interface ChildPlan {
  /** Names the child within its workflow (`sbuild:arm64`), for the other children's `dependsOn`. */
  key: string;
  taskType: TaskType;
  taskName: string;
  /** Every field is the workflow's: the tags derived from them name the workflow as their source. */
  taskData: Record<string, unknown>;
  /** Keys of earlier children it waits for. */
  dependsOn: string[];
}

/** Why a workflow cannot be expanded: the field of its taskData to fix. */
export interface WorkflowPlanError {
  code: 'UNKNOWN_ENVIRONMENT';
  message: string;
  path: string;
}

/** The children of a workflow, in creation order (a child's dependencies come before it), or why there are none. */
export type WorkflowPlan = { ok: true; children: ChildPlan[] } | { ok: false; errors: WorkflowPlanError[] };

/** One task of the registry: its identity, its taskData schema and its tag analysis. */
export interface TaskDefinition<D = unknown> {
  type: TaskType;
  name: string;
  version: number;
  description: string;
  /**
   * The tools (`worker:cap:{tool}`) a worker needs for this task, whatever its data: what a worker
   * image must install to run it. None when absent. Its analysis requires at most these.
   */
  tools?: readonly string[];
  schema: z.ZodType<D>;
  /** The environment the validated data names, so the caller can look it up before analysis. */
  environmentId(data: D): number | null;
  /** Pure: the same data and context always give the same tags in the same order. */
  analyze(data: D, ctx: TaskAnalysisContext): TaskTags;
  /** Workflows only (every workflow has one): the children it expands into when it becomes PENDING. Pure. */
  expand?(data: D, ctx: WorkflowContext): WorkflowPlan;
}
