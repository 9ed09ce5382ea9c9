/** The synchronization_point internal task: a marker in a dependency graph that no worker runs. */
import { z } from 'zod';
import { noTags } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z
  .object({
    step: z.string().min(1),
    display_name: z.string().min(1).optional(),
  })
  .strict();

/** Completed by the server (SUCCESS) as soon as its dependencies have completed (services/workflows/orchestration.ts). */
export const synchronizationPointTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'internal',
  name: 'synchronization_point',
  version: 1,
  description: 'Mark a point in a workflow that completes when its dependencies have.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
};
