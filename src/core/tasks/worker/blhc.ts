/** The blhc worker task: checks a build log for missing hardening flags. */
import { z } from 'zod';
import {
  debianArchitecture,
  executorEnvironmentId,
  executorFields,
  executorTags,
  sourcePackageName,
} from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z
  .object({
    source_package: sourcePackageName.optional(),
    host_architecture: debianArchitecture.optional(),
    ...executorFields,
  })
  .strict();

/** Runs blhc over a build log; the log's architecture is only pinned when the data names one. */
export const blhcTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'blhc',
  version: 1,
  description: 'Check a Debian build log for missing hardening flags with blhc.',
  schema,
  environmentId: executorEnvironmentId,
  analyze: (data, ctx) => executorTags(data, ctx, null),
};
