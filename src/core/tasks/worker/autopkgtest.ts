/** The autopkgtest worker task: runs a source package's test suite. */
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
    source_package: sourcePackageName,
    host_architecture: debianArchitecture,
    ...executorFields,
    include_tests: z.array(z.string().min(1)).optional(),
    exclude_tests: z.array(z.string().min(1)).optional(),
  })
  .strict();

/** Runs autopkgtest; the tests run on the architecture of the packages under test. */
export const autopkgtestTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'autopkgtest',
  version: 1,
  description: 'Run the autopkgtest suite of a Debian source package.',
  tools: ['autopkgtest'],
  schema,
  environmentId: executorEnvironmentId,
  analyze: (data, ctx) => executorTags(data, ctx, 'autopkgtest'),
};
