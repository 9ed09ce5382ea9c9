/** Runs servernoop: nothing, ending with the result its data asks for (`result: false` is FAILURE). */
import { servernoopTask } from '../../core/tasks/server/servernoop.js';
import { serverTaskRunner } from './types.js';

/** The runner of the servernoop server task. */
export const servernoopRunner = serverTaskRunner(servernoopTask, async (data) =>
  data.result === false
    ? { result: 'FAILURE', reason: 'servernoop was asked to fail (taskData.result is false)' }
    : { result: 'SUCCESS' },
);
