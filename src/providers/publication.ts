/**
 * Where a published worker image (`tagsched-image publish`) is bootable, in the words both the
 * publisher and the server use: the providers an image can be published to, the region a
 * publication is recorded under and a pool's launches look it up in, and the form of each
 * provider's image id. An EC2 AMI belongs to one region (the account's `region`); a Hetzner
 * snapshot belongs to the project and boots in every location, so Hetzner has one region, `global`.
 */

/** The providers `tagsched-image publish` publishes to. */
export const PUBLISH_PROVIDERS = ['hetzner', 'ec2'] as const;
export type PublishProvider = (typeof PUBLISH_PROVIDERS)[number];

/** The one region of Hetzner publications: a snapshot boots in every location of its project. */
export const HETZNER_PUBLICATION_REGION = 'global';

/** The form of a region name (an AWS region, or Hetzner's `global`). */
export const PUBLICATION_REGION = /^[a-z]{2,10}(?:-[a-z]+)*(?:-[0-9]{1,2})?$/;
/** The form of an AWS region (as the ec2 provider checks an account's). */
const AWS_REGION = /^[a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}$/;

/** The form of a provider's image id: a Hetzner image id (digits), an AMI id. */
export const PUBLISHED_IMAGE_ID: Readonly<Record<PublishProvider, RegExp>> = {
  hetzner: /^[0-9]{1,18}$/,
  ec2: /^ami-(?:[0-9a-f]{8}|[0-9a-f]{17})$/,
};

/** Whether images can be published to pools of this provider type. */
export function isPublishProvider(type: string): type is PublishProvider {
  return (PUBLISH_PROVIDERS as readonly string[]).includes(type);
}

/**
 * The region a publication to this provider is recorded under, for an account of that provider:
 * the EC2 account's `region`, Hetzner's `global`; null when the account names no region.
 */
export function publicationRegion(
  provider: PublishProvider,
  account: Readonly<Record<string, unknown>> | null | undefined,
): string | null {
  if (provider === 'hetzner') return HETZNER_PUBLICATION_REGION;
  const region = account?.region;
  return typeof region === 'string' && AWS_REGION.test(region) ? region : null;
}
