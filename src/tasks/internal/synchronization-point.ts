/** The synchronization_point internal task: a marker in a workflow graph that runs nowhere. */
import { z } from 'zod';
import { noTags } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z
  .object({
    step: z.string().min(1),
    display_name: z.string().min(1).optional(),
  })
  .strict();

/** Completes when its dependencies do; the server handles it, no worker ever gets it. */
export const synchronizationPointTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'internal',
  name: 'synchronization_point',
  version: 1,
  description: 'Mark a point in a workflow that completes when its dependencies have.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
};
