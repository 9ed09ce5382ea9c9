/** The debian_pipeline workflow: build, then test and check, a source package. */
import { z } from 'zod';
import { debianArchitecture, noTags, objectId } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

// Loose on purpose: the pipeline forwards its other options to child workflows, which validate them.
const schema = z
  .object({
    source_artifact: objectId,
    vendor: z.string().min(1),
    codename: z.string().min(1),
    architectures: z.array(debianArchitecture).min(1).optional(),
    enable_autopkgtest: z.boolean().optional(),
    enable_lintian: z.boolean().optional(),
    enable_piuparts: z.boolean().optional(),
  })
  .loose();

/** Orchestrates the whole pipeline on the server; the workflow itself is never assigned. */
export const debianPipelineWorkflow: TaskDefinition<z.output<typeof schema>> = {
  type: 'workflow',
  name: 'debian_pipeline',
  version: 1,
  description: 'Build, test and check a Debian source package.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
};
