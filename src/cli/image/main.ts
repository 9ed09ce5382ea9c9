/**
 * tagsched-image: builds a worker image from a recipe (docs/design.md: images). `tagsched-image build` takes
 * the recipe from --recipe FILE and/or flags, checks it and the host before any work, then runs
 * the stages (bundles, mmdebstrap, the bootable disk image's own stages, manifest) with their
 * progress on stderr: a live list on a terminal, one line per stage in CI logs. `--dry-run`
 * prints what the build would install (the same list mmdebstrap is given), the tags and the
 * mmdebstrap command line.
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { Listr, ListrLogger, PRESET_TIMER, ProcessOutput } from 'listr2';
import packageJson from '../../../package.json' with { type: 'json' };
import { debianArchitecture } from '../../agent/facts.js';
import { IMAGE_PATHS } from './agent-files.js';
import type { ArchitectureBoot } from './boot-files.js';
import {
  checkHost,
  defaultImageName,
  describeFile,
  HostError,
  mmdebstrapArgs,
  outputPaths,
  plannedPackages,
  planProblems,
  stagedPaths,
  stageFiles,
  type BootBuild,
  type HostFacts,
  type OutputOptions,
  type StagedFiles,
} from './build.js';
import { runStreaming } from './commands.js';
import { imageHandledTasks, imageTags, imageUnhandledTasks } from './contents.js';
import { DISK_FORMATS, diskStages, manifestBoot, type DiskFacts, type DiskFormat } from './disk-image.js';
import { buildManifest, installedProblems, parseDpkgStatus, type InstalledPackage } from './manifest.js';
import type { Manifest, ManifestBoot, ManifestFile } from '../../core/manifest-format.js';
import { IMAGE_BACKENDS, IMAGE_TASKS, parseRecipe, RecipeError, type Recipe } from './recipe.js';
import { failedAttempt, openPublishImage, PublishError, type PublishImage, type PublishPlan } from './publish.js';
import { ec2AccountOf, ec2PublishPlan } from './publish-ec2.js';
import { hetznerPublishPlan, hetznerTokenOf } from './publish-hetzner.js';
import { PUBLISH_PROVIDERS, type PublishProvider } from '../../providers/publication.js';
import { createApi, ERROR_SELECTION } from '../admin/client.js';
import { AdminError } from '../admin/exit-codes.js';
import { resolveConnection } from '../admin/settings.js';

/** Exit codes: 0 built (or planned), 1 the build failed, 64 a bad recipe, flag or host. */
const EXIT = { ok: 0, failed: 1, usage: 64 } as const;

const commaList = (value: string, previous: string[] | undefined) => [
  ...(previous ?? []),
  ...value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
];

/** The machine's Debian architecture: dpkg's when there is one, else Node's mapped to Debian's name. */
function hostArchitecture(): string {
  try {
    return execFileSync('dpkg', ['--print-architecture'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return debianArchitecture(process.arch, os.endianness()) ?? process.arch;
  }
}

interface BuildFlags {
  recipe?: string;
  suite?: string;
  architecture?: string;
  mirror?: string;
  source?: string;
  enableBackends?: string[];
  enableTasks?: string[];
  output: string;
  name?: string;
  diskImage?: boolean;
  diskFormat: DiskFormat;
  bundles?: string;
  aptAuth?: string;
  dryRun?: boolean;
  json?: boolean;
}

/** The recipe of the flags: the JSON file first, then each flag given replacing its key. */
function recipeFromFlags(flags: BuildFlags): Recipe {
  let input: Record<string, unknown> = {};
  if (flags.recipe) {
    let text: string;
    try {
      text = fs.readFileSync(flags.recipe, 'utf8');
    } catch (err) {
      throw new RecipeError([{ field: '--recipe', message: `cannot read ${flags.recipe}: ${(err as Error).message}` }]);
    }
    try {
      input = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new RecipeError([{ field: '--recipe', message: `${flags.recipe} is not JSON: ${(err as Error).message}` }]);
    }
    if (typeof input !== 'object' || input === null || Array.isArray(input))
      return parseRecipe(input, hostArchitecture());
  }
  const over: Record<string, unknown> = {};
  if (flags.suite !== undefined) over.suite = flags.suite;
  if (flags.architecture !== undefined) over.architecture = flags.architecture;
  if (flags.mirror !== undefined) over.mirror = flags.mirror;
  if (flags.enableBackends !== undefined) over.enable_backends = flags.enableBackends;
  if (flags.enableTasks !== undefined) over.enable_tasks = flags.enableTasks;
  if (flags.source !== undefined) {
    try {
      over.source = fs.readFileSync(flags.source, 'utf8');
    } catch (err) {
      throw new RecipeError([{ field: '--source', message: `cannot read ${flags.source}: ${(err as Error).message}` }]);
    }
  }
  return parseRecipe({ ...input, ...over }, hostArchitecture());
}

/** A bootable build's boot and disk identities (a new root file system UUID per build). */
const bootBuildOf = (boot: ArchitectureBoot | null, rootUuid: string): BootBuild | null =>
  boot && { boot, ids: { rootUuid } };

/** Where a dry run's command line says the build stages its files: a directory of the build's own. */
const DRY_RUN_STAGE = '$STAGE';

/**
 * The plan a dry run prints: the packages the build installs (plannedPackages, the list the
 * mmdebstrap command line is given: for a disk image the cloud kernel, GRUB and cloud-init too), the
 * handlers, the tags, and that command line with the staged files under $STAGE. The recipe is the
 * manifest's; the apt auth file appears only in the command line's hooks.
 */
function printPlan(recipe: Recipe, output: OutputOptions, json: boolean): void {
  const { boot, problems } = planProblems(recipe, output);
  if (problems.length) throw new HostError(problems);
  const packages = plannedPackages(recipe, boot);
  const tags = imageTags(recipe, new Set(packages.map((p) => p.name)));
  const handlers = imageHandledTasks(recipe);
  const withoutHandler = imageUnhandledTasks(recipe);
  const staged = stagedPaths(
    recipe,
    DRY_RUN_STAGE,
    bootBuildOf(boot, '00000000-0000-0000-0000-000000000000'),
    output.aptAuth,
  );
  const mmdebstrap = mmdebstrapArgs(recipe, staged, outputPaths(output).rootfs);
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ recipe, packages, handlers, tasksWithoutHandler: withoutHandler, tags, mmdebstrap }, null, 2)}\n`,
    );
    return;
  }
  const out: string[] = [
    `recipe: ${JSON.stringify(recipe)}`,
    '',
    `packages (${packages.length}, with their dependencies at build time):`,
  ];
  for (const p of packages) out.push(`  ${p.name.padEnd(24)} ${p.neededBy.join(', ')}`);
  out.push('', `handlers: ${handlers.join(', ')}`);
  if (withoutHandler.length)
    out.push(
      `tasks with tools but no handler: ${withoutHandler.join(', ')} (they need artifacts tagsched cannot fetch yet)`,
    );
  out.push('', 'tags a worker booted from it reports:');
  for (const t of tags) out.push(`  ${t.tag.padEnd(44)} ${t.source}${t.condition ? ` (when ${t.condition})` : ''}`);
  out.push(
    '',
    `mmdebstrap command line (${DRY_RUN_STAGE}: the build's own directory of staged files):`,
    '  mmdebstrap',
  );
  for (const arg of mmdebstrap) out.push(`    ${arg}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

interface Ctx {
  host?: HostFacts;
  staged?: StagedFiles;
  installed?: InstalledPackage[];
  diskImage?: ManifestFile | null;
  boot?: ManifestBoot;
  manifest?: Manifest;
}

/** Builds the image in stages; resolves to the manifest. */
async function build(recipe: Recipe, output: OutputOptions): Promise<Manifest> {
  const files = outputPaths(output);
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-image-'));
  const started = Date.now();
  const forward = (task: { output: string }) => (line: string) => {
    // mmdebstrap's own stage lines (I: …), not every package apt unpacks.
    if (/^[IWE]: /.test(line)) task.output = line;
  };
  const tasks = new Listr<Ctx>(
    [
      {
        title: 'Check the host (mmdebstrap, keys, output directory)',
        task: async (ctx) => {
          ctx.host = await checkHost(recipe, output);
        },
      },
      {
        title: output.bundlesDir ? `Stage the agent from ${output.bundlesDir}` : 'Bundle the agent and its handler',
        task: async (ctx) => {
          const boot = ctx.host!.boot;
          ctx.staged = await stageFiles(
            recipe,
            path.join(scratch, 'stage'),
            output.bundlesDir,
            bootBuildOf(boot, crypto.randomUUID()),
            output.aptAuth,
          );
        },
      },
      {
        title: `Bootstrap ${recipe.suite}/${recipe.architecture} with mmdebstrap into ${files.rootfs}`,
        task: async (ctx, task) => {
          await runStreaming('mmdebstrap', mmdebstrapArgs(recipe, ctx.staged!, files.rootfs), forward(task));
        },
      },
      {
        title: 'Check the installed packages',
        task: (ctx) => {
          const installed = parseDpkgStatus(fs.readFileSync(ctx.staged!.dpkgStatus, 'utf8'));
          const problems = installedProblems(plannedPackages(recipe, ctx.host!.boot), installed);
          if (problems.length) throw new Error(problems.join('; '));
          ctx.installed = installed;
        },
      },
      {
        title: `Write the bootable disk image ${files.diskImage ?? ''}`,
        enabled: () => files.diskImage !== null,
        task: (ctx, parent) => {
          const staged = ctx.staged!.boot!;
          const facts: DiskFacts = {};
          const job = {
            rootfs: files.rootfs,
            output: files.diskImage!,
            format: output.diskFormat!,
            boot: staged.boot,
            ids: staged.ids,
            scratchDir: path.join(scratch, 'disk'),
          };
          return parent.newListr<Ctx>(
            [
              ...diskStages(job).map((stage) => ({
                title: stage.title,
                task: async (_ctx: Ctx, task: { output: string }) => stage.run(facts, (line) => (task.output = line)),
              })),
              {
                title: 'Describe the disk (size, sha256)',
                task: async (c: Ctx) => {
                  c.diskImage = await describeFile(files.diskImage!, output.outputDir);
                  c.boot = manifestBoot(job, facts);
                },
              },
            ],
            { exitOnError: true },
          );
        },
      },
      {
        title: `Write the manifest ${files.manifest}`,
        task: async (ctx) => {
          const agentSha = (await describeFile(ctx.staged!.agent, scratch)).sha256;
          ctx.manifest = buildManifest({
            name: output.name,
            createdAt: new Date(),
            builtWith: { tagsched: packageJson.version, mmdebstrap: ctx.host!.mmdebstrap },
            recipe,
            files: { rootfs: await describeFile(files.rootfs, output.outputDir), diskImage: ctx.diskImage ?? null },
            boot: ctx.boot ?? null,
            agent: {
              path: IMAGE_PATHS.agent,
              sha256: agentSha,
              handlers: imageHandledTasks(recipe),
              tasksWithoutHandler: imageUnhandledTasks(recipe),
            },
            packages: ctx.installed!,
            tags: imageTags(recipe, new Set(ctx.installed!.map((p) => p.name))),
          });
          fs.writeFileSync(files.manifest, `${JSON.stringify(ctx.manifest, null, 2)}\n`);
        },
      },
    ],
    {
      exitOnError: true,
      renderer: 'default',
      rendererOptions: { timer: PRESET_TIMER },
      fallbackRenderer: 'simple',
      fallbackRendererOptions: { timer: PRESET_TIMER },
    },
  );
  try {
    const ctx = await tasks.run({});
    const m = ctx.manifest!;
    const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
    process.stderr.write(
      [
        `built ${m.name} in ${((Date.now() - started) / 1000).toFixed(0)} s: ${m.packages.length} packages`,
        `  root file system  ${files.rootfs} (${mib(m.files.rootfs.bytes)})`,
        ...(m.files.diskImage && m.boot
          ? [
              `  disk image        ${files.diskImage} (${m.boot.format}, ${mib(m.files.diskImage.bytes)} file, ${mib(m.boot.diskBytes)} disk; kernel ${m.boot.kernel}; ${m.boot.bootModes.join(' and ')})`,
            ]
          : []),
        `  manifest          ${files.manifest}`,
        `  tags              ${m.tags.map((t) => t.tag).join(' ')}`,
        '',
      ].join('\n'),
    );
    return m;
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

interface PublishFlags {
  provider: PublishProvider;
  providerAccountFile: string;
  images: string;
  location: string;
  serverType?: string;
  rescueSshPort: string;
  record: boolean;
  server?: string;
  config?: string;
}

const WHO = 'query PublishWho($name: String!) { me { username isAdmin } workerImage(name: $name) { name } }';
const RECORD = `mutation RecordWorkerImagePublication($input: RecordWorkerImagePublicationInput!) {
  recordWorkerImagePublication(input: $input) { ${ERROR_SELECTION} ... on WorkerImage { name publications { provider region providerImageId } } }
}`;

/** The account file's JSON object (the same fields as a pool's providerAccount). */
function accountFile(file: string): Record<string, unknown> {
  let json: unknown;
  try {
    json = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new PublishError(
      `cannot read the account file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'not JSON'}`,
    );
  }
  if (!json || typeof json !== 'object' || Array.isArray(json))
    throw new PublishError(`the account file ${file} must hold a JSON object, as a pool's providerAccount`);
  return json as Record<string, unknown>;
}

/** An environment variable that must be a URL when set. */
function urlEnv(name: string): string | null {
  const value = process.env[name]?.trim();
  if (!value) return null;
  try {
    new URL(value);
  } catch {
    throw new PublishError(`${name} must be a URL`);
  }
  return value.replace(/\/+$/, '');
}

/** The publisher of a provider, from the flags, the account file and the environment. */
function publishPlan(image: PublishImage, flags: PublishFlags): PublishPlan<unknown> {
  const account = accountFile(flags.providerAccountFile);
  if (flags.provider === 'ec2') {
    return ec2PublishPlan(image, {
      account: ec2AccountOf(account),
      ec2Endpoint: urlEnv('TAGSCHED_EC2_ENDPOINT'),
      ebsEndpoint: urlEnv('TAGSCHED_EBS_ENDPOINT'),
    }) as PublishPlan<unknown>;
  }
  const port = Number(flags.rescueSshPort);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new PublishError('--rescue-ssh-port must be a port number');
  return hetznerPublishPlan(image, {
    token: hetznerTokenOf(account),
    apiUrl: urlEnv('TAGSCHED_HETZNER_API_URL') ?? 'https://api.hetzner.cloud/v1',
    location: flags.location,
    serverType: flags.serverType,
    sshPort: port,
  }) as PublishPlan<unknown>;
}

/** A listr2 logger that writes to stderr only. */
const progressLogger = () => new ListrLogger({ processOutput: new ProcessOutput(process.stderr, process.stderr) });

interface PublishCtx {
  image?: PublishImage;
  plan?: PublishPlan<unknown>;
  published?: { providerImageId: string; region: string };
}

/** Publishes an image: the server check first (unless --no-record), then the provider's stages, then the record. */
async function publish(name: string, flags: PublishFlags): Promise<void> {
  const connection = flags.record
    ? resolveConnection({ server: flags.server, config: flags.config }, process.env)
    : null;
  const api = connection && createApi(connection, { timeoutMs: 30_000 });
  const started = Date.now();
  const ctx: PublishCtx = {};
  const tasks = new Listr<PublishCtx>(
    [
      {
        title: `Check the image ${name} in ${flags.images}${connection ? `, and that ${connection.serverUrl} has it registered` : ''}`,
        task: async (c, task) => {
          if (api) {
            const who = await api.query<{ me: { isAdmin: boolean } | null; workerImage: { name: string } | null }>(
              WHO,
              { name },
            );
            if (!who.me?.isAdmin)
              throw new PublishError(
                `recording the publication needs an admin token (the token came from ${api.connection.tokenSource ?? 'nowhere'}); or give --no-record`,
              );
            if (!who.workerImage)
              throw new PublishError(
                `${api.connection.serverUrl} has no worker image ${name}: register it first (tagsched-admin images register), or give --no-record`,
              );
          }
          c.image = await openPublishImage(path.resolve(flags.images), name, (line) => (task.output = line));
          c.plan = publishPlan(c.image, flags);
        },
      },
      {
        title: `Publish to ${flags.provider}`,
        task: (c, parent) =>
          parent.newListr<PublishCtx>(
            c.plan!.stages.map((stage) => ({
              title: stage.title,
              task: async (_c, task) => stage.run(c.plan!.state, (line) => (task.output = line)),
            })),
            { exitOnError: true },
          ),
      },
      {
        title: `Record the publication on ${connection?.serverUrl ?? 'the server'}`,
        task: async (c, task) => {
          c.published = c.plan!.result(c.plan!.state);
          if (!api) return task.skip('not recorded (--no-record)');
          const { providerImageId, region } = c.published;
          await api.mutate(
            RECORD,
            { input: { image: name, provider: flags.provider, region, providerImageId } },
            'recordWorkerImagePublication',
          );
        },
      },
    ],
    {
      exitOnError: true,
      renderer: 'default',
      // Progress goes to stderr: stdout is the publication's JSON line, for scripts.
      rendererOptions: { timer: PRESET_TIMER, logger: progressLogger() },
      fallbackRenderer: 'simple',
      fallbackRendererOptions: { timer: PRESET_TIMER, logger: progressLogger() },
    },
  );
  try {
    await tasks.run(ctx);
  } catch (err) {
    if (ctx.published) {
      const { providerImageId, region } = ctx.published;
      throw new PublishError(
        `${flags.provider} image ${providerImageId} (${region}) was published, but recording it failed: ${(err as Error).message}; record it with the recordWorkerImagePublication mutation (image ${name}, provider ${flags.provider}, region ${region}, providerImageId ${providerImageId})`,
      );
    }
    // A provider stage failed: remove what the attempt made, and say what was removed.
    throw ctx.plan ? await failedAttempt(ctx.plan, err) : err;
  } finally {
    ctx.image?.dispose();
  }
  const { providerImageId, region } = ctx.published!;
  process.stderr.write(
    `published ${name} to ${flags.provider} (${region}) in ${((Date.now() - started) / 1000).toFixed(0)} s${api ? ', recorded on the server' : ' (not recorded: --no-record)'}\n`,
  );
  process.stdout.write(`${JSON.stringify({ image: name, provider: flags.provider, region, providerImageId })}\n`);
}

/** The command line: `build` and `publish`. */
function program(): Command {
  const cmd = new Command('tagsched-image')
    .description(
      'Builds tagsched worker images: a Debian root file system with the agent, booting as a worker with only a server URL and an activation token.',
    )
    .version(packageJson.version, '-V, --version', 'print the version and exit')
    .exitOverride()
    .showHelpAfterError('(run with --help for the options)');
  cmd
    .command('build')
    .description(
      'Build an image (a root file system tarball, a manifest, and a bootable disk image with --disk-image).',
    )
    .option(
      '--recipe <file>',
      'a JSON recipe: {"suite", "architecture", "mirror", "source", "enable_backends", "enable_tasks", "ssh_authorized_keys"}; flags replace its keys',
    )
    .option('--suite <suite>', 'Debian suite or codename (default trixie, the stable release)')
    .option('--architecture <arch>', "Debian architecture (default the host's)")
    .option(
      '--mirror <url>',
      'Debian archive to build from (default deb.debian.org, with updates and security for a stable release); no user or password in it: see --apt-auth',
    )
    .option(
      '--apt-auth <file>',
      'an apt auth.conf file (apt_auth.conf(5): "machine HOST/PATH login USER password SECRET") for a mirror or source that needs a login; used during the build only, not in the image, the recipe or the manifest',
    )
    .option('--source <file>', 'a deb822 APT source to add to the image (Types, URIs, Suites, Components, Signed-By)')
    .addOption(
      new Option(
        '--enable-backends <list>',
        `comma-separated executor backends: ${IMAGE_BACKENDS.join(', ')} (default unshare)`,
      ).argParser(commaList),
    )
    .addOption(
      new Option(
        '--enable-tasks <list>',
        `comma-separated tasks: ${IMAGE_TASKS.join(', ')} (default autopkgtest,sbuild)`,
      ).argParser(commaList),
    )
    .option('--output <dir>', 'where the image and its manifest are written', './images')
    .option('--name <name>', 'file name of the image, without extension (default tagsched-worker-SUITE-ARCH)')
    .option(
      '--disk-image',
      'also write a bootable disk image NAME.raw or NAME.qcow2 (BIOS and UEFI, cloud-init; needs root, mkfs.ext4, mkfs.vfat, mtools, sfdisk)',
    )
    .addOption(
      new Option('--disk-format <format>', 'the disk image format (qcow2 needs qemu-img)')
        .choices(DISK_FORMATS)
        .default('raw'),
    )
    .option(
      '--bundles <dir>',
      'use the prebuilt tagsched-worker.mjs and tagsched-handler.mjs of this directory (default: bundle them from src/)',
    )
    .option('--dry-run', 'print the packages, handlers, tags and the mmdebstrap command line, and build nothing')
    .option('--json', 'with --dry-run: print them as JSON')
    .action(async (flags: BuildFlags) => {
      const recipe = recipeFromFlags(flags);
      const output: OutputOptions = {
        outputDir: path.resolve(flags.output),
        name: flags.name ?? defaultImageName(recipe),
        diskFormat: flags.diskImage ? flags.diskFormat : null,
        bundlesDir: flags.bundles ? path.resolve(flags.bundles) : null,
        aptAuth: flags.aptAuth ? path.resolve(flags.aptAuth) : null,
      };
      if (flags.dryRun) return printPlan(recipe, output, Boolean(flags.json));
      await build(recipe, output);
    });
  cmd
    .command('publish <name>')
    .description(
      'Make a built image bootable on a cloud and record where on the server: Hetzner (a snapshot written through a rescue system) or EC2 (an EBS snapshot through the EBS direct APIs, then an AMI).',
    )
    .addOption(new Option('--provider <provider>', 'the cloud').choices(PUBLISH_PROVIDERS).makeOptionMandatory())
    .requiredOption(
      '--provider-account-file <file>',
      'a JSON file with the account, as a pool\'s providerAccount: {"token"} for hetzner; {"accessKeyId", "secretAccessKey", "region", "sessionToken"?} for ec2',
    )
    .option('--images <dir>', "the build's output directory, holding NAME.manifest.json and the disk image", './images')
    .option(
      '--location <location>',
      'hetzner: the location of the temporary server (the snapshot boots in every location)',
      'fsn1',
    )
    .option('--server-type <type>', "hetzner: the temporary server's type (default cx22 for amd64, cax11 for arm64)")
    .option(
      '--rescue-ssh-port <port>',
      'hetzner: the SSH port of the rescue system (22; a stand-in listens elsewhere)',
      '22',
    )
    .option('--no-record', 'only publish: do not record the publication on the server')
    .option(
      '--server <url>',
      "the tagsched server to record on (default: TAGSCHED_SERVER_URL or tagsched-admin's config), with an admin token from TAGSCHED_TOKEN or that config",
    )
    .option(
      '--config <file>',
      "tagsched-admin's config file (default: TAGSCHED_ADMIN_CONFIG or ~/.config/tagsched/admin.json)",
    )
    .action(async (name: string, flags: PublishFlags) => publish(name, flags));
  return cmd;
}

async function main(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (err instanceof AdminError) {
      process.stderr.write(
        `tagsched-image: ${err.message}${err.details?.length ? `\n  ${err.details.join('\n  ')}` : ''}\n`,
      );
      return EXIT.failed;
    }
    if (err instanceof PublishError) {
      process.stderr.write(`tagsched-image publish: ${err.message}\n`);
      return EXIT.failed;
    }
    if (err instanceof RecipeError || err instanceof HostError) {
      process.stderr.write(`tagsched-image: ${err.message}\n`);
      return EXIT.usage;
    }
    process.stderr.write(`tagsched-image: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT.failed;
  }
}

process.exitCode = await main(process.argv.slice(2));
