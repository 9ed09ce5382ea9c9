/**
 * Worker images: register the manifest `tagsched-image build` wrote, so that pools can name the
 * image (its tags become their template tags); list and show the registered ones.
 */
import type { Command } from 'commander';
import { jsonObjectFile } from './arguments.js';
import { ERROR_SELECTION } from './client.js';
import { AdminError, EXIT } from './exit-codes.js';
import { heading, instant, renderFields, renderTable, type Output } from './output.js';
import type { Ctx, Register } from './command-context.js';

interface ImageRow {
  name: string;
  recipe: {
    suite: string;
    architecture: string;
    mirror: string | null;
    source: string | null;
    enableBackends: string[];
    enableTasks: string[];
  };
  packageCount: number;
  tags: { tag: string; source: string; condition: string | null }[];
  rootfs: { path: string; bytes: number; sha256: string };
  diskImage: { path: string; bytes: number; sha256: string } | null;
  createdAt: string;
  registeredAt: string;
  packages?: { name: string; version: string; architecture: string }[];
  publications?: { provider: string; region: string; providerImageId: string; publishedAt: string }[];
}

const FIELDS = `name recipe { suite architecture mirror source enableBackends enableTasks } packageCount tags { tag source condition }
  rootfs { path bytes sha256 } diskImage { path bytes sha256 } createdAt registeredAt`;
const IMAGES = `query WorkerImages { workerImages { ${FIELDS} } }`;
const IMAGE = `query WorkerImage($name: String!) { workerImage(name: $name) { ${FIELDS} packages { name version architecture } publications { provider region providerImageId publishedAt } } }`;
const REGISTER = `mutation RegisterWorkerImage($input: RegisterWorkerImageInput!) {
  registerWorkerImage(input: $input) { ${ERROR_SELECTION} ... on WorkerImage { ${FIELDS} } }
}`;

const MIB = 1024 ** 2;
const size = (bytes: number) => `${Math.round(bytes / MIB)} MiB`;
const recipeText = (r: ImageRow['recipe']) =>
  `${r.suite}/${r.architecture} backends=${r.enableBackends.join(',') || '-'} tasks=${r.enableTasks.join(',') || '-'}`;

function imageTagTable(out: Output, image: ImageRow): string {
  return renderTable(out, image.tags, [
    { header: 'TAG', value: (t) => t.tag },
    { header: 'FROM', value: (t) => t.source },
    { header: 'CONDITION', value: (t) => t.condition, shrink: true },
  ]);
}

async function register(ctx: Ctx, file: string) {
  const manifest = await jsonObjectFile('FILE', file, ctx.io.stdin);
  const data = await ctx.api().mutate(REGISTER, { input: { manifest } }, 'registerWorkerImage');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const image = data.registerWorkerImage as ImageRow;
  ctx.out.line(
    `Registered image ${image.name} (${recipeText(image.recipe)}, ${image.packageCount} packages); a pool names it with --image ${image.name}.`,
  );
  ctx.out.write(
    heading(ctx.out, `Template tags of the pools that name it (provenance admin, source image:${image.name})`),
  );
  ctx.out.write(imageTagTable(ctx.out, image));
}

async function listImages(ctx: Ctx) {
  const data = await ctx.api().query<{ workerImages: ImageRow[] }>(IMAGES);
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(
    renderTable(ctx.out, data.workerImages, [
      { header: 'NAME', value: (i) => i.name },
      { header: 'SUITE', value: (i) => i.recipe.suite },
      { header: 'ARCH', value: (i) => i.recipe.architecture },
      { header: 'BACKENDS', value: (i) => i.recipe.enableBackends.join(',') },
      { header: 'TASKS', value: (i) => i.recipe.enableTasks.join(',') },
      { header: 'PACKAGES', value: (i) => i.packageCount, align: 'right' },
      { header: 'ROOTFS', value: (i) => size(i.rootfs.bytes), align: 'right' },
      { header: 'BUILT', value: (i) => instant(i.createdAt), shrink: true },
    ]),
  );
}

async function showImage(ctx: Ctx, name: string, opts: { packages?: boolean }) {
  const data = await ctx.api().query<{ workerImage: ImageRow | null }>(IMAGE, { name });
  if (!data.workerImage) throw new AdminError(`no image named ${JSON.stringify(name)}`, EXIT.notFound, 'NOT_FOUND');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { out } = ctx;
  const i = data.workerImage;
  out.write(
    renderFields(out, [
      ['Image', i.name],
      ['Suite', i.recipe.suite],
      ['Architecture', i.recipe.architecture],
      ['Mirror', i.recipe.mirror ?? 'default'],
      ['Extra APT source', i.recipe.source ? i.recipe.source.trim().split('\n').join(' | ') : null],
      ['Backends', i.recipe.enableBackends.join(', ') || '-'],
      ['Tasks', i.recipe.enableTasks.join(', ') || '-'],
      ['Packages', i.packageCount],
      ['Root file system', `${i.rootfs.path} (${size(i.rootfs.bytes)}, sha256 ${i.rootfs.sha256})`],
      [
        'Disk image',
        i.diskImage ? `${i.diskImage.path} (${size(i.diskImage.bytes)}, sha256 ${i.diskImage.sha256})` : null,
      ],
      ['Built', instant(i.createdAt)],
      ['Registered', instant(i.registeredAt)],
      [
        'Published',
        i.publications?.length
          ? i.publications
              .map((p) => `${p.provider} ${p.region} ${p.providerImageId} (${instant(p.publishedAt)})`)
              .join('; ')
          : 'nowhere yet (tagsched-image publish)',
      ],
    ]),
  );
  out.write(heading(out, `Tags: what a pool naming it gets (provenance admin, source image:${i.name})`));
  out.write(imageTagTable(out, i));
  if (opts.packages) {
    out.write(heading(out, 'Packages'));
    out.write(
      renderTable(out, i.packages ?? [], [
        { header: 'PACKAGE', value: (p) => p.name },
        { header: 'VERSION', value: (p) => p.version },
        { header: 'ARCH', value: (p) => p.architecture },
      ]),
    );
  }
}

export const registerImageCommands: Register = (program: Command, action) => {
  const images = program
    .command('images')
    .description('Worker images: the manifests of tagsched-image builds that pools name');
  action(
    images
      .command('register <file>')
      .description(
        'Registers an image from the NAME.manifest.json tagsched-image build wrote (- for stdin); a registered image never changes (admins)',
      )
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin images register out/trixie-sbuild.manifest.json\n  tagsched-admin pool create sbuilders --provider hetzner --image trixie-sbuild …',
      ),
    (ctx, [file]) => register(ctx, file),
  );
  action(
    images
      .command('list')
      .description('Lists the registered images')
      .addHelpText('after', '\nExamples:\n  tagsched-admin images list'),
    (ctx) => listImages(ctx),
  );
  action(
    images
      .command('show <name>')
      .description(
        'Shows an image: its recipe, files, the tags pools naming it get and (with --packages) every package',
      )
      .option('--packages', 'also list every package with its version')
      .addHelpText('after', '\nExamples:\n  tagsched-admin images show trixie-sbuild --packages'),
    (ctx, [name], opts) => showImage(ctx, name, opts),
  );
};
