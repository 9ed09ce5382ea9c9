/** The debsign signing task: signs an upload with an OpenPGP key held by the signing worker. */
import { z } from 'zod';
import { objectId } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z
  .object({
    unsigned: objectId,
    key: z
      .string()
      .regex(/^([0-9A-Fa-f]{40}|[0-9A-Fa-f]{64})$/, 'expected an OpenPGP fingerprint of 40 or 64 hexadecimal digits'),
  })
  .strict();

/** Signs an upload; only signing workers with debsign installed can. */
export const debsignTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'signing',
  name: 'debsign',
  version: 1,
  description: 'Sign a Debian upload with debsign.',
  tools: ['debsign'],
  schema,
  environmentId: () => null,
  analyze: () => ({ provided: [], required: [{ tag: 'worker:cap:debsign', source: 'task-registry' }] }),
};
