/** The servernoop server task: does nothing on a server worker, to test the plumbing. */
import { z } from 'zod';
import { noTags } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z.object({ result: z.boolean().optional() }).strict();

/** Finishes with the requested result on a server worker. */
export const servernoopTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'server',
  name: 'servernoop',
  version: 1,
  description: 'Do nothing on a server worker and report the requested result.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
};
