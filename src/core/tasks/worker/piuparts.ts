/** The piuparts worker task: tests installation, upgrade and removal of binary packages. */
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
    host_architecture: debianArchitecture,
    ...executorFields,
  })
  .strict();

/** Runs piuparts; it installs binaries, so it needs their architecture natively. */
export const piupartsTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'piuparts',
  version: 1,
  description: 'Test installation, upgrade and removal of Debian binary packages with piuparts.',
  schema,
  environmentId: executorEnvironmentId,
  analyze: (data, ctx) => executorTags(data, ctx, null),
};
