/**
 * What a server-task runner is: the code the service itself runs for one server task of the task
 * registry (src/core/tasks/server/), on a built-in server worker (server-workers.ts).
 */
import type { Logger } from '../../core/log.js';
import type { TaskDefinition } from '../../core/tasks/types.js';

/** How a server task ended, and for a FAILURE or ERROR why (a thrown error is ERROR, with its message). */
export interface ServerTaskOutcome {
  result: 'SUCCESS' | 'FAILURE' | 'ERROR' | 'SKIPPED';
  reason?: string;
}

/** What a runner gets besides its taskData. */
export interface ServerTaskContext {
  readonly workRequestId: number;
  readonly log: Logger;
  /** Aborted when the process stops: a long runner should end early (its request is then retried). */
  readonly signal: AbortSignal;
}

/** One runner: the task it runs (name and version, which its server worker reports) and how. */
export interface ServerTaskRunner {
  readonly name: string;
  readonly version: number;
  /** Runs the task with its stored taskData, validated again by the task's schema. */
  run(taskData: unknown, ctx: ServerTaskContext): Promise<ServerTaskOutcome>;
}

/** A runner for a server task of the registry; its data is checked with that task's schema before `run` sees it. */
export function serverTaskRunner<D>(
  task: TaskDefinition<D>,
  run: (data: D, ctx: ServerTaskContext) => Promise<ServerTaskOutcome>,
): ServerTaskRunner {
  if (task.type !== 'server') throw new Error(`${task.type} task ${task.name} is not a server task`);
  return {
    name: task.name,
    version: task.version,
    run: async (taskData, ctx) => run(task.schema.parse(taskData), ctx),
  };
}
