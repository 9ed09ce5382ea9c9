import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { EnvironmentSchema, type Environment } from '../../storage/entities/environment.js';
import { requireAdmin, type Viewer } from '../identity/auth.js';
import { parseInput } from '../input/validate.js';

const environmentInput = z.object({
  codename: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.+-]*$/, 'must be a Debian codename such as "bookworm"')
    .max(100),
  architecture: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]*$/, 'must be a Debian architecture name such as "arm64"')
    .max(50),
  variant: z.string().max(100).nullish(),
  backend: z.enum(['unshare', 'incus-lxc', 'incus-vm', 'qemu']).nullish(),
  imageFormat: z.string().max(50).nullish(),
});

/** Registers a build environment (an image built for one architecture). Admin only. */
export async function createEnvironment(em: EntityManager, viewer: Viewer, input: unknown): Promise<Environment> {
  requireAdmin(viewer);
  const e = parseInput(environmentInput, input, 'input');
  const environment = em.create(EnvironmentSchema, {
    codename: e.codename,
    architecture: e.architecture,
    variant: e.variant ?? null,
    backend: e.backend ?? null,
    imageFormat: e.imageFormat ?? null,
  });
  await em.flush();
  return environment;
}
