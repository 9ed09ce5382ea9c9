/** The generatekey signing task: creates a key on a signing worker. */
import { z } from 'zod';
import { noTags } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z
  .object({
    purpose: z.enum(['uefi', 'openpgp']),
    description: z.string().min(1),
  })
  .strict();

/** Generates a key where it will be kept: on a signing worker, which every signing worker can do. */
export const generatekeyTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'signing',
  name: 'generatekey',
  version: 1,
  description: 'Generate a signing key on a signing worker.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
};
