/** The mmdebstrap worker task: bootstraps a Debian tarball. */
import { z } from 'zod';
import { bootstrapFields, bootstrapTags } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z.object({ ...bootstrapFields }).strict();

/** Bootstraps a system tarball with mmdebstrap, natively for the bootstrap architecture. */
export const mmdebstrapTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'mmdebstrap',
  version: 1,
  description: 'Bootstrap a Debian system tarball with mmdebstrap.',
  tools: ['mmdebstrap'],
  schema,
  environmentId: () => null,
  analyze: (data) => bootstrapTags(data),
};
