import { boolVar, intVar } from './variables.js';

/** What the run history decides (docs/reference/statistics.md): heavy work, and the memory and disk a request asks for. */
export interface StatisticsConfig {
  /** A task whose average run over the last 30 days is at least this long is heavy work (scheduler/rules/heavy-work.ts), in seconds; 0: never by history. */
  readonly heavyTaskSeconds: number;
  /** Requests ask for the memory and disk their task, package and architecture used lately (core/tasks/learned-requirements.ts). */
  readonly learnedRequirements: boolean;
  /** Learned minimums read the runs of every workspace, private ones included, not only the request's own and public ones: a disclosure (docs/reference/statistics.md). */
  readonly sharedHistory: boolean;
}

/** Reads the statistics section from the environment. */
export function readStatisticsConfig(env: NodeJS.ProcessEnv): StatisticsConfig {
  return {
    heavyTaskSeconds: intVar(env, 'TAGSCHED_HEAVY_TASK_SECONDS', 60 * 60), // one hour
    learnedRequirements: boolVar(env, 'TAGSCHED_LEARNED_REQUIREMENTS', false),
    sharedHistory: boolVar(env, 'TAGSCHED_SHARED_HISTORY', false),
  };
}
