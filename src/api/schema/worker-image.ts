import { WorkerImageSchema, type WorkerImage } from '../../storage/entities/worker-image.js';
import { builder } from '../builder.js';
import { firstDescription, firstOf } from './pagination.js';
import type { Manifest, ManifestFile } from '../../core/manifest-format.js';
import { publicRecipe, registerWorkerImage } from '../../services/pools/worker-images.js';
import { publicationsOf, recordWorkerImagePublication } from '../../services/pools/publications.js';
import type { WorkerImagePublication } from '../../storage/entities/worker-image-publication.js';
import {
  AlreadyExistsError,
  ForbiddenError,
  InputError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';

type Recipe = Manifest['recipe'];
type ImageTag = Manifest['tags'][number];
type ImagePackage = Manifest['packages'][number];

const ImageRecipeRef = builder.objectRef<Recipe>('ImageRecipe').implement({
  description: 'What an image was built from (tagsched-image build)',
  fields: (t) => ({
    suite: t.exposeString('suite', { description: 'The Debian suite, e.g. bookworm' }),
    architecture: t.exposeString('architecture', { description: 'The Debian architecture, e.g. arm64' }),
    mirror: t.exposeString('mirror', {
      nullable: true,
      description: 'The APT mirror it was built from; null: the default',
    }),
    source: t.exposeString('source', { nullable: true, description: 'The deb822 APT source added to the image' }),
    enableBackends: t.stringList({
      description: 'The executor backends it installs (unshare, incus-lxc, incus-vm, qemu)',
      resolve: (r) => r.enable_backends,
    }),
    enableTasks: t.stringList({ description: 'The tasks it installs the tools of', resolve: (r) => r.enable_tasks }),
  }),
});

const ImageTagRef = builder.objectRef<ImageTag>('ImageTag').implement({
  description: 'A tag a worker booted from the image provides, and what in the image gives it',
  fields: (t) => ({
    tag: t.exposeString('tag', { description: 'The tag' }),
    source: t.exposeString('source', {
      description: 'recipe:architecture, backend:NAME, package:NAME or handler:TASK',
    }),
    condition: t.string({
      nullable: true,
      description: 'What the machine needs besides the image (e.g. /dev/kvm)',
      resolve: (x) => x.condition ?? null,
    }),
  }),
});

const ImagePackageRef = builder.objectRef<ImagePackage>('ImagePackage').implement({
  description: 'A Debian package installed in an image',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'The package name' }),
    version: t.exposeString('version', { description: 'Its version' }),
    architecture: t.exposeString('architecture', { description: 'Its architecture (or all)' }),
  }),
});

const ImageFileRef = builder.objectRef<ManifestFile>('ImageFile').implement({
  description: 'A file the build wrote, relative to its manifest',
  fields: (t) => ({
    path: t.exposeString('path', { description: 'Its path, relative to the manifest' }),
    bytes: t.float({ description: 'Its size in bytes', resolve: (f) => f.bytes }),
    sha256: t.exposeString('sha256', { description: 'Its SHA-256, in hex' }),
  }),
});

const WorkerImagePublicationRef = builder.objectRef<WorkerImagePublication>('WorkerImagePublication').implement({
  description:
    "Where an image is bootable on a cloud (tagsched-image publish): the provider's id of it in one provider and region",
  fields: (t) => ({
    provider: t.exposeString('provider', { description: 'The provider type: hetzner or ec2' }),
    region: t.exposeString('region', {
      description: 'The EC2 region of the AMI; global for Hetzner (a snapshot boots in every location of its project)',
    }),
    providerImageId: t.exposeString('providerImageId', {
      description: 'The id pools of that provider and region boot: a Hetzner image (snapshot) id, an AMI id',
    }),
    publishedAt: t.expose('publishedAt', { type: 'DateTime', description: 'When it was published (recorded)' }),
  }),
});

/** A registered worker image (docs/design.md: images): its manifest, as `tagsched-image build` wrote it. */
export const WorkerImageRef = builder.objectRef<WorkerImage>('WorkerImage').implement({
  description:
    'A registered worker image: what tagsched-image build made, as its manifest says; pools name it in their specifications',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Its unique name' }),
    recipe: t.field({
      type: ImageRecipeRef,
      description: 'What it was built from',
      resolve: (i) => publicRecipe(i.manifest),
    }),
    packageCount: t.int({ description: 'How many packages it holds', resolve: (i) => i.manifest.packages.length }),
    packages: t.field({
      type: [ImagePackageRef],
      description: 'Every package installed, with its version',
      resolve: (i) => i.manifest.packages,
    }),
    tags: t.field({
      type: [ImageTagRef],
      description: 'What a pool naming the image gets as template tags (provenance ADMIN, source image:NAME)',
      resolve: (i) => i.manifest.tags,
    }),
    rootfs: t.field({
      type: ImageFileRef,
      description: 'Its root file system tarball',
      resolve: (i) => i.manifest.files.rootfs,
    }),
    diskImage: t.field({
      type: ImageFileRef,
      nullable: true,
      description: 'Its bootable disk image; null when the build made none',
      resolve: (i) => i.manifest.files.diskImage,
    }),
    createdAt: t.field({
      type: 'DateTime',
      description: 'When it was built',
      resolve: (i) => new Date(i.manifest.createdAt),
    }),
    registeredAt: t.expose('registeredAt', { type: 'DateTime', description: 'When it was registered' }),
    publications: t.field({
      type: [WorkerImagePublicationRef],
      description:
        'Where it is published (tagsched-image publish), by provider and region: a hetzner or ec2 pool naming it with no providerImage boots these ids',
      resolve: (i, _args, ctx) => publicationsOf(ctx.em, i),
    }),
  }),
});

const RegisterWorkerImageInput = builder.inputType('RegisterWorkerImageInput', {
  description: 'An image to register, by its manifest',
  fields: (t) => ({
    manifest: t.field({
      type: 'JSON',
      required: true,
      description: 'The NAME.manifest.json that tagsched-image build wrote',
    }),
  }),
});

const RecordWorkerImagePublicationInput = builder.inputType('RecordWorkerImagePublicationInput', {
  description: 'Where a registered image was published',
  fields: (t) => ({
    image: t.string({ required: true, description: 'The registered image' }),
    provider: t.string({ required: true, description: 'hetzner or ec2' }),
    region: t.string({ required: true, description: "The AMI's EC2 region; global for Hetzner" }),
    providerImageId: t.string({ required: true, description: 'The Hetzner image (snapshot) id or the AMI id' }),
  }),
});

builder.queryFields((t) => ({
  workerImages: t.field({
    type: [WorkerImageRef],
    description: 'The registered worker images, by name',
    args: { first: t.arg.int({ description: firstDescription('Query.workerImages', 'images') }) },
    resolve: (_root, args, ctx) =>
      ctx.em.find(
        WorkerImageSchema,
        {},
        { orderBy: { name: 'asc' }, limit: firstOf('Query.workerImages', args.first) },
      ),
  }),
  workerImage: t.field({
    type: WorkerImageRef,
    nullable: true,
    description: 'A registered image by name; null when there is none',
    args: { name: t.arg.string({ required: true, description: "The image's name" }) },
    resolve: (_root, { name }, ctx) => ctx.em.findOne(WorkerImageSchema, { name }),
  }),
}));

builder.mutationFields((t) => ({
  registerWorkerImage: t.field({
    type: WorkerImageRef,
    description:
      'Admin: registers an image from its manifest, so that pools can name it; a registered image never changes (a new build gets a new name)',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, AlreadyExistsError] },
    args: { input: t.arg({ type: RegisterWorkerImageInput, required: true, description: 'The manifest to register' }) },
    resolve: (_root, { input }, ctx) => registerWorkerImage(ctx.em, ctx.viewer, ctx.config, input.manifest),
  }),
  recordWorkerImagePublication: t.field({
    type: WorkerImageRef,
    description:
      'Admin: records where an image is published (tagsched-image publish does this); it replaces the id of the same provider and region',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: { input: t.arg({ type: RecordWorkerImagePublicationInput, required: true, description: 'The publication' }) },
    resolve: (_root, { input }, ctx) => recordWorkerImagePublication(ctx.em, ctx.viewer, input),
  }),
}));
