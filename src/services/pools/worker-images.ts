/**
 * Worker images registered with the service (docs/design.md: images): an admin hands over the manifest that
 * `tagsched-image build` wrote, it is checked whole (its shape, its name, the tags it promises, no
 * credentials in its recipe's URLs) and kept unchanged; pools then name it in `specifications.image`
 * and take their template tags from it.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { Config } from '../../core/config/config.js';
import { WorkerImageSchema, type WorkerImage } from '../../storage/entities/worker-image.js';
import { AlreadyExistsError, ERROR_CODES, InputError, type InputProblem } from '../../core/errors.js';
import { manifestSchema, type Manifest } from '../../core/manifest-format.js';
import { hasUserInfo, USERINFO_ADVICE, withoutUserInfo } from '../../core/url-userinfo.js';
import { imageTagProblems } from '../input/admin-input.js';
import { requireAdmin, type Viewer } from '../identity/auth.js';
import { creating } from '../input/flush.js';
import { nameSchema, zodProblems } from '../input/validate.js';

/** The most packages a manifest may list (a full Debian desktop has a few thousand). */
export const MAX_IMAGE_PACKAGES = 50_000;

// The manifest as `tagsched-image build` writes it (cli/image/manifest.ts), with the limits the service
// adds: its name is a name like a pool's, its package list is bounded, and its recipe (shown to anyone)
// has no URL with a user name or password (core/url-userinfo.ts), in its mirror or its source.
const noUserInfo = (value: string | null) => value === null || !hasUserInfo(value);
const registeredManifestSchema = manifestSchema.extend({
  name: nameSchema,
  recipe: manifestSchema.shape.recipe.extend({
    mirror: manifestSchema.shape.recipe.shape.mirror.refine(noUserInfo, `the URL ${USERINFO_ADVICE}`),
    source: manifestSchema.shape.recipe.shape.source.refine(noUserInfo, `a URI of the source ${USERINFO_ADVICE}`),
  }),
  createdAt: z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date and time, such as 2026-11-23T05:00:00Z' }),
  packages: manifestSchema.shape.packages.max(MAX_IMAGE_PACKAGES, `must list at most ${MAX_IMAGE_PACKAGES} packages`),
});

/** Registers a worker image from its manifest; every problem is named with its field, and nothing is written when there is one. Admin only. */
export async function registerWorkerImage(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'input' | 'tags'>,
  manifest: unknown,
): Promise<WorkerImage> {
  requireAdmin(viewer);
  const parsed = zodProblems(registeredManifestSchema, manifest, 'input.manifest');
  if (!parsed.data) throw InputError.of(parsed.problems);
  const { name, tags } = parsed.data;
  const problems: InputProblem[] = imageTagProblems(
    name,
    tags.map((t) => t.tag),
    'input.manifest.tags',
    config,
  );
  if (problems.length) throw InputError.of(problems);
  const what = `a worker image "${name}"`;
  if (await em.count(WorkerImageSchema, { name })) {
    throw new AlreadyExistsError(
      `${what} is already registered; images do not change once registered, so give a new build a new name (tagsched-image build --name)`,
    );
  }
  const image = em.create(WorkerImageSchema, { name, manifest: parsed.data });
  await creating(what, () => em.flush());
  return image;
}

/**
 * The recipe of a registered image as the API shows it: without the user information of its URLs,
 * which registration refuses but an image registered before that refusal may hold.
 */
export function publicRecipe(manifest: Manifest): Manifest['recipe'] {
  const { mirror, source } = manifest.recipe;
  return { ...manifest.recipe, mirror: mirror && withoutUserInfo(mirror), source: source && withoutUserInfo(source) };
}

/** The registered image of this name, or null. */
export function findWorkerImage(em: EntityManager, name: string): Promise<WorkerImage | null> {
  return em.findOne(WorkerImageSchema, { name });
}

/** The image a pool's specifications name, as given (null when they name none or are not an object). */
export function imageNameOf(specifications: unknown): string | null {
  if (typeof specifications !== 'object' || specifications === null) return null;
  const name = (specifications as { image?: unknown }).image;
  return typeof name === 'string' ? name : null;
}

// Only these lists come from the image when a pool names one (core/tags/worker-tags.ts): given beside an image, they would be ignored.
const FROM_IMAGE = ['architectures', 'enableBackends', 'enableTasks'] as const;

/**
 * The problems of a pool's `specifications.image`: it must name a registered image, and a pool that
 * names one takes its architectures, backends and tasks from the image's manifest, not from its
 * specifications.
 */
export function poolImageProblems(
  specifications: Record<string, unknown>,
  image: WorkerImage | null,
  path: string,
): InputProblem[] {
  const name = imageNameOf(specifications);
  if (name === null) return [];
  const problems: InputProblem[] = [];
  if (!image || image.name !== name) {
    problems.push({
      code: ERROR_CODES.UNKNOWN_IMAGE,
      message: `${path}.image: no worker image "${name}" is registered (tagsched-admin images list)`,
      path: `${path}.image`,
      tag: null,
    });
  }
  for (const key of FROM_IMAGE) {
    const value = specifications[key];
    if (Array.isArray(value) && value.length) {
      problems.push({
        code: ERROR_CODES.INVALID_INPUT,
        message: `${path}.${key}: a pool that names an image takes this from the image's manifest; leave it out`,
        path: `${path}.${key}`,
        tag: null,
      });
    }
  }
  return problems;
}
