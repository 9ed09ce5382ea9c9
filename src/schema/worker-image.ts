import { WorkerImageSchema, type WorkerImage } from '../entities/worker-image.js';
import { builder } from '../builder.js';
import type { Manifest, ManifestFile } from '../images/manifest.js';
import { registerWorkerImage } from '../services/worker-images.js';
import { COMMON_ERRORS } from './errors.js';

type Recipe = Manifest['recipe'];
type ImageTag = Manifest['tags'][number];
type ImagePackage = Manifest['packages'][number];

const ImageRecipeRef = builder.objectRef<Recipe>('ImageRecipe').implement({
  description: 'What an image was built from (tagsched-image build)',
  fields: (t) => ({
    suite: t.exposeString('suite'),
    architecture: t.exposeString('architecture'),
    mirror: t.exposeString('mirror', { nullable: true }),
    source: t.exposeString('source', { nullable: true, description: 'The deb822 APT source added to the image' }),
    enableBackends: t.stringList({ resolve: (r) => r.enable_backends }),
    enableTasks: t.stringList({ resolve: (r) => r.enable_tasks }),
  }),
});

const ImageTagRef = builder.objectRef<ImageTag>('ImageTag').implement({
  description: 'A tag a worker booted from the image provides, and what in the image gives it',
  fields: (t) => ({
    tag: t.exposeString('tag'),
    source: t.exposeString('source', { description: 'recipe:architecture, backend:NAME, package:NAME or handler:TASK' }),
    condition: t.string({ nullable: true, description: 'What the machine needs besides the image (e.g. /dev/kvm)', resolve: (x) => x.condition ?? null }),
  }),
});

const ImagePackageRef = builder.objectRef<ImagePackage>('ImagePackage').implement({
  fields: (t) => ({ name: t.exposeString('name'), version: t.exposeString('version'), architecture: t.exposeString('architecture') }),
});

const ImageFileRef = builder.objectRef<ManifestFile>('ImageFile').implement({
  description: 'A file the build wrote, relative to its manifest',
  fields: (t) => ({ path: t.exposeString('path'), bytes: t.float({ resolve: (f) => f.bytes }), sha256: t.exposeString('sha256') }),
});

/** A registered worker image (DESIGN §12): its manifest, as `tagsched-image build` wrote it. */
export const WorkerImageRef = builder.objectRef<WorkerImage>('WorkerImage').implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    recipe: t.field({ type: ImageRecipeRef, resolve: (i) => i.manifest.recipe }),
    packageCount: t.int({ resolve: (i) => i.manifest.packages.length }),
    packages: t.field({ type: [ImagePackageRef], description: 'Every package installed, with its version', resolve: (i) => i.manifest.packages }),
    tags: t.field({ type: [ImageTagRef], description: 'What a pool naming the image gets as template tags (provenance ADMIN, source image:NAME)', resolve: (i) => i.manifest.tags }),
    rootfs: t.field({ type: ImageFileRef, resolve: (i) => i.manifest.files.rootfs }),
    diskImage: t.field({ type: ImageFileRef, nullable: true, resolve: (i) => i.manifest.files.diskImage }),
    createdAt: t.field({ type: 'DateTime', description: 'When it was built', resolve: (i) => new Date(i.manifest.createdAt) }),
    registeredAt: t.expose('registeredAt', { type: 'DateTime' }),
  }),
});

const RegisterWorkerImageInput = builder.inputType('RegisterWorkerImageInput', {
  fields: (t) => ({
    manifest: t.field({ type: 'JSON', required: true, description: 'The NAME.manifest.json that tagsched-image build wrote' }),
  }),
});

builder.queryFields((t) => ({
  workerImages: t.field({
    type: [WorkerImageRef],
    description: 'The registered worker images, by name',
    resolve: (_root, _args, ctx) => ctx.em.find(WorkerImageSchema, {}, { orderBy: { name: 'asc' } }),
  }),
  workerImage: t.field({
    type: WorkerImageRef,
    nullable: true,
    args: { name: t.arg.string({ required: true }) },
    resolve: (_root, { name }, ctx) => ctx.em.findOne(WorkerImageSchema, { name }),
  }),
}));

builder.mutationFields((t) => ({
  registerWorkerImage: t.field({
    type: WorkerImageRef,
    description: 'Admin: registers an image from its manifest, so that pools can name it; a registered image never changes (a new build gets a new name)',
    errors: { types: COMMON_ERRORS },
    args: { input: t.arg({ type: RegisterWorkerImageInput, required: true }) },
    resolve: (_root, { input }, ctx) => registerWorkerImage(ctx.em, ctx.viewer, ctx.config, input.manifest),
  }),
}));
