/**
 * The format of an image's manifest (NAME.manifest.json): its JSON shape and the check of a file
 * against it. Pure (zod only), so the server's entities and services read manifests without the
 * image builder.
 */
import { z } from 'zod';

/** Bumped when a field changes meaning. */
export const MANIFEST_FORMAT = 1;

/** A file the build wrote, relative to the manifest. */
export interface ManifestFile {
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
}

const fileSchema = z.object({
  path: z.string(),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** How a bootable disk image boots: its file's size and sha256 are in `files.diskImage`. */
const bootSchema = z.object({
  format: z.enum(['raw', 'qcow2']),
  /** The disk's size as a machine sees it (a qcow2 file is smaller). */
  diskBytes: z.number().int().positive(),
  /** The kernel's release, as `uname -r` prints it. */
  kernel: z.string(),
  bootModes: z.array(z.enum(['bios', 'uefi'])),
  partitions: z.array(
    z.object({
      number: z.number().int().positive(),
      name: z.string(),
      type: z.string(),
      offsetBytes: z.number().int().nonnegative(),
      bytes: z.number().int().positive(),
    }),
  ),
  rootUuid: z.string(),
  cloudInitDatasources: z.array(z.string()),
});

/** How a bootable disk image boots. */
export type ManifestBoot = z.infer<typeof bootSchema>;

/** The manifest's JSON shape; parseManifest checks a file against it. */
export const manifestSchema = z.object({
  format: z.literal(MANIFEST_FORMAT),
  name: z.string().min(1),
  createdAt: z.string(),
  builtWith: z.object({ tagsched: z.string(), mmdebstrap: z.string() }),
  recipe: z.object({
    suite: z.string(),
    architecture: z.string(),
    mirror: z.string().nullable(),
    source: z.string().nullable(),
    enable_backends: z.array(z.string()),
    enable_tasks: z.array(z.string()),
    ssh_authorized_keys: z.array(z.string()).optional(),
  }),
  files: z.object({ rootfs: fileSchema, diskImage: fileSchema.nullable() }),
  /** Null (or absent, in manifests written before disk images booted) without a bootable disk image. */
  boot: bootSchema.nullable().default(null),
  agent: z.object({
    path: z.string(),
    sha256: z.string(),
    handlers: z.array(z.string()),
    tasksWithoutHandler: z.array(z.string()),
  }),
  packages: z.array(z.object({ name: z.string(), version: z.string(), architecture: z.string() })),
  tags: z.array(z.object({ tag: z.string(), source: z.string(), condition: z.string().optional() })),
});

/** A manifest as written. */
export type Manifest = z.infer<typeof manifestSchema>;

/** Reads a manifest file's JSON; throws with the fields at fault when it is not one. */
export function parseManifest(json: unknown): Manifest {
  const parsed = manifestSchema.safeParse(json);
  if (!parsed.success)
    throw new Error(
      `not a tagsched image manifest: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  return parsed.data;
}
