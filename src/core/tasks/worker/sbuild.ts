/** The sbuild worker task: builds a source package into binary packages. */
import { z } from 'zod';
import {
  buildProfile,
  debianArchitecture,
  executorEnvironmentId,
  executorFields,
  executorTags,
  sourcePackageName,
} from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z
  .object({
    source_package: sourcePackageName,
    host_architecture: debianArchitecture,
    ...executorFields,
    build_components: z
      .array(z.enum(['any', 'all', 'source']))
      .min(1)
      .optional(),
    build_profiles: z.array(buildProfile).optional(),
  })
  .strict();

/** Builds a source package; needs sbuild on a worker that runs the build architecture natively. */
export const sbuildTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'sbuild',
  version: 1,
  description: 'Build a Debian source package with sbuild.',
  tools: ['sbuild'],
  schema,
  environmentId: executorEnvironmentId,
  analyze: (data, ctx) => executorTags(data, ctx, 'sbuild'),
};
