/** The simplesystemimagebuild worker task: bootstraps a bootable disk image. */
import { z } from 'zod';
import { bootstrapFields, bootstrapTags } from '../task-data.js';
import type { TaskDefinition } from '../types.js';

const schema = z
  .object({
    ...bootstrapFields,
    disk_image: z
      .object({
        format: z.enum(['raw', 'qcow2']),
        filename: z
          .string()
          .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/, 'expected a file name without directories')
          .optional(),
        partitions: z
          .array(
            z
              .object({
                size: z.number().int().positive(),
                filesystem: z.enum(['ext4', 'vfat', 'xfs', 'btrfs', 'none']),
                mountpoint: z.string().startsWith('/').optional(),
              })
              .strict(),
          )
          .min(1)
          .optional(),
      })
      .strict(),
  })
  .strict();

/** Builds a disk image from an mmdebstrap bootstrap, natively for the bootstrap architecture. */
export const simplesystemimagebuildTask: TaskDefinition<z.output<typeof schema>> = {
  type: 'worker',
  name: 'simplesystemimagebuild',
  version: 1,
  description: 'Build a bootable Debian disk image.',
  tools: ['mmdebstrap'],
  schema,
  environmentId: () => null,
  analyze: (data) => bootstrapTags(data),
};
