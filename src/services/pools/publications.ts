/**
 * Publications of worker images (`tagsched-image publish`): where a registered image is bootable,
 * per provider and region (providers/publication.ts says which region). An admin (the publish
 * command, with an admin token) records one; a hetzner or ec2 pool that names the image and no
 * `providerImage` boots the published id of its provider and region, and is refused when there is none.
 */
import { LIST_MAXIMA } from '../input/list-maxima.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import {
  WorkerImagePublicationSchema,
  type WorkerImagePublication,
} from '../../storage/entities/worker-image-publication.js';
import { WorkerImageSchema, type WorkerImage } from '../../storage/entities/worker-image.js';
import { ERROR_CODES, InputError, NotFoundError, type InputProblem } from '../../core/errors.js';
import {
  isPublishProvider,
  PUBLICATION_REGION,
  publicationRegion,
  PUBLISH_PROVIDERS,
  PUBLISHED_IMAGE_ID,
  type PublishProvider,
} from '../../providers/publication.js';
import { ProviderError } from '../../providers/provider.js';
import { requireAdmin, type Viewer } from '../identity/auth.js';
import { nameSchema, oneOf, zodProblems } from '../input/validate.js';

/** Input of recordWorkerImagePublication. */
export interface PublicationInput {
  image: string;
  provider: string;
  region: string;
  providerImageId: string;
}

const inputSchema = z
  .object({
    image: nameSchema,
    provider: oneOf(PUBLISH_PROVIDERS),
    region: z
      .string()
      .max(50)
      .regex(PUBLICATION_REGION, 'must be a region such as eu-central-1 (ec2) or global (hetzner)'),
    providerImageId: z.string().max(100),
  })
  .superRefine((input, ctx) => {
    if (!PUBLISHED_IMAGE_ID[input.provider].test(input.providerImageId)) {
      ctx.addIssue({
        code: 'custom',
        path: ['providerImageId'],
        message:
          input.provider === 'ec2'
            ? 'must be an AMI id (ami- and 8 or 17 hex digits)'
            : 'must be a Hetzner image id (digits)',
      });
    }
    const expected = publicationRegion(input.provider, { region: input.region });
    if (expected !== input.region)
      ctx.addIssue({
        code: 'custom',
        path: ['region'],
        message: `a ${input.provider} publication's region is ${String(expected)}`,
      });
  });

/** The publications of an image, by provider and region: the first LIST_MAXIMA.publicationsShown of them. */
export function publicationsOf(em: EntityManager, image: WorkerImage): Promise<WorkerImagePublication[]> {
  return em.find(
    WorkerImagePublicationSchema,
    { image },
    { orderBy: { provider: 'asc', region: 'asc' }, limit: LIST_MAXIMA.publicationsShown },
  );
}

/** Records (or replaces) where an image is published. Admin only. */
export async function recordWorkerImagePublication(
  em: EntityManager,
  viewer: Viewer,
  input: PublicationInput,
): Promise<WorkerImage> {
  requireAdmin(viewer);
  const parsed = zodProblems(inputSchema, input, 'input');
  if (!parsed.data) throw InputError.of(parsed.problems);
  const { image: name, provider, region, providerImageId } = parsed.data;
  const image = await em.findOne(WorkerImageSchema, { name });
  if (!image)
    throw new NotFoundError(
      `input.image: no worker image "${name}" is registered (tagsched-admin images register)`,
      'input.image',
    );
  if (!image.manifest.boot) {
    throw InputError.of([
      {
        code: ERROR_CODES.INVALID_INPUT,
        message: `input.image: the worker image "${name}" has no bootable disk image to publish (tagsched-image build --disk-image)`,
        path: 'input.image',
        tag: null,
      },
    ]);
  }
  const existing = await em.findOne(WorkerImagePublicationSchema, { image, provider, region });
  if (existing) {
    existing.providerImageId = providerImageId;
    existing.publishedAt = new Date();
  } else em.create(WorkerImagePublicationSchema, { image, provider, region, providerImageId, publishedAt: new Date() });
  await em.flush();
  return image;
}

/** The published id of an image for a provider and region, or null. */
async function publishedId(
  em: EntityManager,
  image: string,
  provider: PublishProvider,
  region: string,
): Promise<string | null> {
  const found = await em.findOne(WorkerImagePublicationSchema, { image: { name: image }, provider, region });
  return found?.providerImageId ?? null;
}

/** Whether a pool of this provider with these specifications boots a published image (it names an image and no providerImage). */
function bootsPublished(
  providerType: string,
  specifications: Readonly<Record<string, unknown>>,
): providerType is PublishProvider {
  return (
    isPublishProvider(providerType) && typeof specifications.image === 'string' && specifications.providerImage == null
  );
}

/** Where an image is published, as pool checks read it: provider and region. */
export type PublishedPlace = Pick<WorkerImagePublication, 'provider' | 'region'>;

/** The places the named image is published to (none when it names none). */
export async function publishedPlaces(em: EntityManager, imageName: string | null): Promise<PublishedPlace[]> {
  if (imageName === null) return [];
  return em.find(WorkerImagePublicationSchema, { image: { name: imageName } }, { fields: ['provider', 'region'] });
}

/**
 * The problem of a hetzner or ec2 pool that names an image and no `providerImage` when the image
 * (`published`: where it is published) has no publication for the pool's provider and region. None
 * for other pools, nor when the account names no region (the provider says so itself).
 */
export function poolPublicationProblems(
  providerType: string,
  specifications: Readonly<Record<string, unknown>>,
  published: readonly PublishedPlace[],
  account: Readonly<Record<string, unknown>> | null | undefined,
  path: string,
): InputProblem[] {
  if (!bootsPublished(providerType, specifications)) return [];
  const image = specifications.image as string;
  const region = publicationRegion(providerType, account);
  if (region === null || published.some((p) => p.provider === providerType && p.region === region)) return [];
  return [
    {
      code: ERROR_CODES.INVALID_INPUT,
      message: `${path}.image: the worker image "${image}" is not published to ${providerType} in ${region} (tagsched-image publish ${image} --provider ${providerType}), and the pool gives no providerImage`,
      path: `${path}.image`,
      tag: null,
    },
  ];
}

/**
 * A pool's specifications as its launches use them: a hetzner or ec2 pool that names an image and no
 * `providerImage` gets the image's published id for its provider and region; others unchanged.
 * Throws an `invalid` ProviderError when there is no such publication (the pool was changed, or the publication removed).
 */
export async function launchSpecifications(
  em: EntityManager,
  providerType: string,
  specifications: Readonly<Record<string, unknown>>,
  account: Readonly<Record<string, unknown>> | null,
): Promise<Readonly<Record<string, unknown>>> {
  if (!bootsPublished(providerType, specifications)) return specifications;
  const image = specifications.image as string;
  const region = publicationRegion(providerType, account);
  const id = region === null ? null : await publishedId(em, image, providerType, region);
  if (!id)
    throw new ProviderError(
      'invalid',
      `the worker image "${image}" is not published to ${providerType} in ${region ?? "the account's region"} (tagsched-image publish), and the pool gives no providerImage`,
      'not_published',
    );
  return { ...specifications, providerImage: id };
}
