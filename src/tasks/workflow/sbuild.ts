/** The sbuild workflow: fans a source package out into one sbuild work request per architecture. */
import { z } from 'zod';
import { EXECUTOR_BACKENDS } from '../types.js';
import { debianArchitecture, noTags, objectId } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

// Loose on purpose: the workflow passes its other options through to the child tasks, which
// validate them strictly when they are created; only what the orchestrator reads is checked here.
const schema = z
  .object({
    input: z.object({ source_artifact: objectId }).loose(),
    target_distribution: z.string().min(1),
    architectures: z.array(debianArchitecture).min(1),
    backend: z.enum(EXECUTOR_BACKENDS).optional(),
  })
  .loose();

/** Orchestrates sbuild children on the server; the workflow itself is never assigned. */
export const sbuildWorkflow: TaskDefinition<z.output<typeof schema>> = {
  type: 'workflow',
  name: 'sbuild',
  version: 1,
  description: 'Build a source package for several architectures.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
};
