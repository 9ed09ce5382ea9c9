/** Every server task the service can run itself; adding one is adding its runner's file and one line here. */
import { servernoopRunner } from './server-noop.js';
import type { ServerTaskRunner } from './types.js';

/** The runners, one per server task of the task registry (a test keeps the two in step). */
export const SERVER_TASK_RUNNERS: readonly ServerTaskRunner[] = [servernoopRunner];

/** The runner of a server task among these, or undefined. */
export function findServerTaskRunner(runners: readonly ServerTaskRunner[], name: string): ServerTaskRunner | undefined {
  return runners.find((r) => r.name === name);
}
