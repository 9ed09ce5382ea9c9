import { countVar } from './variables.js';

/** The built-in server workers of this process, which run server tasks (src/loops/server-tasks/). */
export interface ServerWorkersConfig {
  /** Server workers of this process; 0 for none. */
  readonly count: number;
  /** Server tasks each of them runs at once; 0 also means no server workers. */
  readonly concurrency: number;
}

/** Reads the server workers section from the environment. */
export function readServerWorkersConfig(env: NodeJS.ProcessEnv): ServerWorkersConfig {
  return {
    count: countVar(env, 'TAGSCHED_SERVER_WORKERS', 1, 64),
    concurrency: countVar(env, 'TAGSCHED_SERVER_WORKER_CONCURRENCY', 4, 1024),
  };
}
