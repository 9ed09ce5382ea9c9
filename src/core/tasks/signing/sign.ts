/** The sign signing task: signs artifacts for UEFI Secure Boot or with OpenPGP. */
import { z } from 'zod';
import { objectId } from '../task-data.js';
import type { TaskDefinition, TaskTags } from '../types.js';

const schema = z
  .object({
    purpose: z.enum(['uefi', 'openpgp']),
    unsigned: z.array(objectId).min(1),
    key: z.string().min(1),
  })
  .strict();

/** UEFI signing needs sbsign on the worker; OpenPGP signing is built into every signing worker. */
function analyze(data: z.output<typeof schema>): TaskTags {
  if (data.purpose === 'uefi')
    return { provided: [], required: [{ tag: 'worker:cap:sbsign', source: 'task-data:purpose' }] };
  return { provided: [], required: [] };
}

/** Signs artifacts with a key held by a signing worker. */
export const signTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'signing',
  name: 'sign',
  version: 1,
  description: 'Sign artifacts with a key held by a signing worker.',
  tools: ['sbsign'],
  schema,
  environmentId: () => null,
  analyze,
};
