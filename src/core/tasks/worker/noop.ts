/** The noop worker task: does nothing on a worker, to test the plumbing. */
import { z } from 'zod';
import { noTags } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z.object({ result: z.boolean().optional() }).strict();

/** Finishes with the requested result on any worker; useful for smoke tests of scheduling. */
export const noopTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'noop',
  version: 1,
  description: 'Do nothing on a worker and report the requested result.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
};
