/**
 * An image's manifest (NAME.manifest.json beside the tarball): the recipe it was built from,
 * every package it holds with its version (read from the built tree's dpkg status), the tags a
 * worker booted from it reports, the files it was written to and, for a bootable disk image, how
 * it boots. Pools and people read it to know what an image is without opening it.
 */
import { fieldValue, parseDeb822 } from './deb822.js';
import type { ImageTag, PackageNeed } from './contents.js';
import { MANIFEST_FORMAT, type Manifest, type ManifestBoot, type ManifestFile } from '../../core/manifest-format.js';
import type { Recipe } from './recipe.js';

/** The oldest nodejs the agent runs on (package.json engines). */
export const MIN_NODEJS = { major: 20, minor: 19 } as const;

/** A package installed in the image. */
export interface InstalledPackage {
  readonly name: string;
  readonly version: string;
  readonly architecture: string;
}

/** The packages dpkg's status file says are installed (`Status: install ok installed`), sorted by name. */
export function parseDpkgStatus(text: string): InstalledPackage[] {
  const { paragraphs, problems } = parseDeb822(text);
  if (problems.length)
    throw new Error(`the image's dpkg status is not deb822: line ${problems[0].line}: ${problems[0].message}`);
  return paragraphs
    .filter((p) => fieldValue(p, 'Status') === 'install ok installed')
    .map((p) => ({
      name: fieldValue(p, 'Package') ?? '',
      version: fieldValue(p, 'Version') ?? '',
      architecture: fieldValue(p, 'Architecture') ?? '',
    }))
    .sort((a, b) => a.name.localeCompare(b.name) || a.architecture.localeCompare(b.architecture));
}

/** The upstream major and minor of a Debian version (`20.19.2+dfsg-1` → 20, 19; an epoch is skipped). */
export function upstreamMajorMinor(version: string): { major: number; minor: number } | null {
  const m = /^(?:\d+:)?(\d+)\.(\d+)/.exec(version);
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : null;
}

/**
 * What is wrong with a built image's package list: planned packages that are not installed, and
 * a nodejs too old for the agent. An empty list means the image is what the recipe asked for.
 */
export function installedProblems(planned: readonly PackageNeed[], installed: readonly InstalledPackage[]): string[] {
  const byName = new Map(installed.map((p) => [p.name, p]));
  const problems = planned
    .filter((p) => !byName.has(p.name))
    .map((p) => `package ${p.name} (for ${p.neededBy.join(', ')}) is not installed`);
  const nodejs = byName.get('nodejs');
  if (nodejs) {
    const v = upstreamMajorMinor(nodejs.version);
    if (!v || v.major < MIN_NODEJS.major || (v.major === MIN_NODEJS.major && v.minor < MIN_NODEJS.minor)) {
      problems.push(
        `nodejs ${nodejs.version} is older than the agent needs (${MIN_NODEJS.major}.${MIN_NODEJS.minor}): build from a newer suite`,
      );
    }
  }
  return problems;
}

/** Everything a manifest is made of. */
export interface ManifestInput {
  name: string;
  createdAt: Date;
  builtWith: { tagsched: string; mmdebstrap: string };
  recipe: Recipe;
  files: { rootfs: ManifestFile; diskImage: ManifestFile | null };
  boot?: ManifestBoot | null;
  agent: { path: string; sha256: string; handlers: readonly string[]; tasksWithoutHandler: readonly string[] };
  packages: readonly InstalledPackage[];
  tags: readonly ImageTag[];
}

/** The recipe as the manifest writes it: mutable copies of its lists, and ssh_authorized_keys only when there are some. */
function recipeJson(recipe: Recipe): Manifest['recipe'] {
  const { ssh_authorized_keys: keys, ...rest } = recipe;
  return {
    ...rest,
    enable_backends: [...rest.enable_backends],
    enable_tasks: [...rest.enable_tasks],
    ...(keys ? { ssh_authorized_keys: [...keys] } : {}),
  };
}

/** The manifest of a built image. */
export function buildManifest(input: ManifestInput): Manifest {
  return {
    format: MANIFEST_FORMAT,
    name: input.name,
    createdAt: input.createdAt.toISOString(),
    builtWith: input.builtWith,
    recipe: recipeJson(input.recipe),
    files: input.files,
    boot: input.boot ?? null,
    agent: {
      ...input.agent,
      handlers: [...input.agent.handlers],
      tasksWithoutHandler: [...input.agent.tasksWithoutHandler],
    },
    packages: [...input.packages],
    tags: input.tags.map((t) => ({ ...t })),
  };
}
