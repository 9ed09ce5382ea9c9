/**
 * The shape every task module fills in: what a task is called, how its taskData is validated,
 * and which tags it contributes. The tags a task returns here always carry provenance `system`.
 */
import type { z } from 'zod';

/** The kinds of task, as stored on a work request (DESIGN §5). */
export const TASK_TYPES = ['worker', 'server', 'signing', 'internal', 'workflow'] as const;
/** One of {@link TASK_TYPES}. */
export type TaskType = (typeof TASK_TYPES)[number];

/** Task types that never run on a worker, so they require `worker:type:not-assignable`. */
export const UNASSIGNABLE_TASK_TYPES: readonly TaskType[] = ['internal', 'workflow'];

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

/** One task of the registry: its identity, its taskData schema and its tag analysis. */
export interface TaskDefinition<D = unknown> {
  type: TaskType;
  name: string;
  version: number;
  description: string;
  schema: z.ZodType<D>;
  /** The environment the validated data names, so the caller can look it up before analysis. */
  environmentId(data: D): number | null;
  /** Pure: the same data and context always give the same tags in the same order. */
  analyze(data: D, ctx: TaskAnalysisContext): TaskTags;
}
