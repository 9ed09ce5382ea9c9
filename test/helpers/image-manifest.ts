/**
 * A manifest as `tagsched-image build` writes it, made from a recipe by the same functions the build
 * uses (src/cli/image/contents.ts, manifest.ts), without building anything: for tests that register images.
 */
import { imagePackages, imageTags } from '../../src/cli/image/contents.js';
import { buildManifest } from '../../src/cli/image/manifest.js';
import type { Manifest } from '../../src/core/manifest-format.js';
import { parseRecipe } from '../../src/cli/image/recipe.js';

/** The manifest of an amd64 image `name` built from `recipe` (default: unshare and sbuild). */
export function imageManifest(
  name: string,
  recipe: Record<string, unknown> = { enable_backends: ['unshare'], enable_tasks: ['sbuild'] },
): Manifest {
  const parsed = parseRecipe(recipe, 'amd64');
  const file = { path: `${name}.tar`, bytes: 379_584_512, sha256: 'a'.repeat(64) };
  return buildManifest({
    name,
    createdAt: new Date('2026-11-23T04:00:00Z'),
    builtWith: { tagsched: '0.1.0', mmdebstrap: '1.5.7' },
    recipe: parsed,
    files: { rootfs: file, diskImage: null },
    agent: {
      path: '/usr/lib/tagsched-worker/tagsched-worker.mjs',
      sha256: 'b'.repeat(64),
      handlers: ['noop', 'sbuild'],
      tasksWithoutHandler: [],
    },
    packages: imagePackages(parsed).map((p) => ({ name: p.name, version: '1.0-1', architecture: 'amd64' })),
    tags: imageTags(parsed),
  });
}
