/** The lintian worker task: checks packages for policy violations. */
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
    fail_on_severity: z.enum(['error', 'warning', 'info', 'pedantic', 'experimental', 'overridden', 'none']).optional(),
  })
  .strict();

/** Runs lintian; architecture-agnostic unless an environment or host architecture pins it. */
export const lintianTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'lintian',
  version: 1,
  description: 'Check Debian packages with lintian.',
  schema,
  environmentId: executorEnvironmentId,
  analyze: (data, ctx) => executorTags(data, ctx, null),
};
