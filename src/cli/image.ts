/**
 * tagsched-image: builds a worker image from a recipe (docs/design.md: images). `tagsched-image build` takes
 * the recipe from --recipe FILE and/or flags, checks it and the host before any work, then runs
 * the stages (bundles, mmdebstrap, the bootable disk image's own stages, manifest) with their
 * progress on stderr: a live list on a terminal, one line per stage in CI logs. `--dry-run`
 * prints the packages and the tags.
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import { Listr, PRESET_TIMER } from 'listr2';
import packageJson from '../../package.json' with { type: 'json' };
import { debianArchitecture } from '../agent/facts.js';
import { IMAGE_PATHS } from '../images/agent-files.js';
import {
  checkHost,
  defaultImageName,
  describeFile,
  HostError,
  mmdebstrapArgs,
  outputPaths,
  plannedPackages,
  stageFiles,
  type HostFacts,
  type OutputOptions,
  type StagedFiles,
} from '../images/build.js';
import { runStreaming } from '../images/commands.js';
import { imageHandledTasks, imagePackages, imageTags, imageUnhandledTasks } from '../images/contents.js';
import { DISK_FORMATS, diskStages, manifestBoot, type DiskFacts, type DiskFormat } from '../images/disk-image.js';
import { buildManifest, installedProblems, parseDpkgStatus, type InstalledPackage } from '../images/manifest.js';
import type { Manifest, ManifestBoot, ManifestFile } from '../images/manifest-format.js';
import { IMAGE_BACKENDS, IMAGE_TASKS, parseRecipe, RecipeError, type Recipe } from '../images/recipe.js';

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
    return execFileSync('dpkg', ['--print-architecture'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
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
    if (typeof input !== 'object' || input === null || Array.isArray(input)) return parseRecipe(input, hostArchitecture());
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

/** The plan a dry run prints: packages with what needs them, the handlers, and the tags. */
function printPlan(recipe: Recipe, json: boolean): void {
  const packages = imagePackages(recipe);
  const tags = imageTags(recipe);
  const handlers = imageHandledTasks(recipe);
  const withoutHandler = imageUnhandledTasks(recipe);
  if (json) {
    process.stdout.write(`${JSON.stringify({ recipe, packages, handlers, tasksWithoutHandler: withoutHandler, tags }, null, 2)}\n`);
    return;
  }
  const out: string[] = [`recipe: ${JSON.stringify(recipe)}`, '', `packages (${packages.length}, with their dependencies at build time):`];
  for (const p of packages) out.push(`  ${p.name.padEnd(24)} ${p.neededBy.join(', ')}`);
  out.push('', `handlers: ${handlers.join(', ')}`);
  if (withoutHandler.length) out.push(`tasks with tools but no handler: ${withoutHandler.join(', ')} (they need artifacts tagsched cannot fetch yet)`);
  out.push('', 'tags a worker booted from it reports:');
  for (const t of tags) out.push(`  ${t.tag.padEnd(44)} ${t.source}${t.condition ? ` (when ${t.condition})` : ''}`);
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
          ctx.staged = await stageFiles(recipe, path.join(scratch, 'stage'), output.bundlesDir, boot && { boot, ids: { rootUuid: crypto.randomUUID() } });
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
          const job = { rootfs: files.rootfs, output: files.diskImage!, format: output.diskFormat!, boot: staged.boot, ids: staged.ids, scratchDir: path.join(scratch, 'disk') };
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
            agent: { path: IMAGE_PATHS.agent, sha256: agentSha, handlers: imageHandledTasks(recipe), tasksWithoutHandler: imageUnhandledTasks(recipe) },
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

/** The command line; `build` is the only command. */
function program(): Command {
  const cmd = new Command('tagsched-image')
    .description('Builds tagsched worker images: a Debian root file system with the agent, booting as a worker with only a server URL and an activation token.')
    .version(packageJson.version, '-V, --version', 'print the version and exit')
    .exitOverride()
    .showHelpAfterError('(run with --help for the options)');
  cmd
    .command('build')
    .description('Build an image (a root file system tarball, a manifest, and a bootable disk image with --disk-image).')
    .option('--recipe <file>', 'a JSON recipe: {"suite", "architecture", "mirror", "source", "enable_backends", "enable_tasks", "ssh_authorized_keys"}; flags replace its keys')
    .option('--suite <suite>', 'Debian suite or codename (default trixie, the stable release)')
    .option('--architecture <arch>', "Debian architecture (default the host's)")
    .option('--mirror <url>', 'Debian archive to build from (default deb.debian.org, with updates and security for a stable release)')
    .option('--source <file>', 'a deb822 APT source to add to the image (Types, URIs, Suites, Components, Signed-By)')
    .addOption(new Option('--enable-backends <list>', `comma-separated executor backends: ${IMAGE_BACKENDS.join(', ')} (default unshare)`).argParser(commaList))
    .addOption(new Option('--enable-tasks <list>', `comma-separated tasks: ${IMAGE_TASKS.join(', ')} (default autopkgtest,sbuild)`).argParser(commaList))
    .option('--output <dir>', 'where the image and its manifest are written', './images')
    .option('--name <name>', 'file name of the image, without extension (default tagsched-worker-SUITE-ARCH)')
    .option('--disk-image', 'also write a bootable disk image NAME.raw or NAME.qcow2 (BIOS and UEFI, cloud-init; needs root, mkfs.ext4, mkfs.vfat, mtools, sfdisk)')
    .addOption(new Option('--disk-format <format>', 'the disk image format (qcow2 needs qemu-img)').choices(DISK_FORMATS).default('raw'))
    .option('--bundles <dir>', 'use the prebuilt tagsched-worker.mjs and tagsched-handler.mjs of this directory (default: bundle them from src/)')
    .option('--dry-run', 'print the packages, handlers and tags, and build nothing')
    .option('--json', 'with --dry-run: print them as JSON')
    .action(async (flags: BuildFlags) => {
      const recipe = recipeFromFlags(flags);
      if (flags.dryRun) return printPlan(recipe, Boolean(flags.json));
      await build(recipe, {
        outputDir: path.resolve(flags.output),
        name: flags.name ?? defaultImageName(recipe),
        diskFormat: flags.diskImage ? flags.diskFormat : null,
        bundlesDir: flags.bundles ? path.resolve(flags.bundles) : null,
      });
    });
  return cmd;
}

async function main(argv: string[]): Promise<number> {
  try {
    await program().parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (err instanceof RecipeError || err instanceof HostError) {
      process.stderr.write(`tagsched-image: ${err.message}\n`);
      return EXIT.usage;
    }
    process.stderr.write(`tagsched-image: ${err instanceof Error ? err.message : String(err)}\n`);
    return EXIT.failed;
  }
}

process.exitCode = await main(process.argv.slice(2));
