/**
 * Building an image: the host checks made before any work, the files staged for the image, the
 * mmdebstrap command line, and the steps after it (dpkg status → manifest). The CLI
 * (src/cli/image/main.ts) runs these as stages; the decisions about content live in contents.ts and,
 * for a bootable disk, boot-files.ts; disk-image.ts assembles the disk.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildBundles, BUNDLES } from '../build/bundles.js';
import { AGENT_USER, agentUnit, IMAGE_PATHS, imageEnvFile, SUBORDINATE_IDS } from './agent-files.js';
import { parseAptSource } from './apt-source.js';
import {
  architectureBoot,
  BOOT_PATHS,
  bootPackages,
  cloudInitConfig,
  fstab,
  grubConfig,
  grubEarlyConfig,
  grubMkimageArgs,
  type ArchitectureBoot,
  type DiskIds,
} from './boot-files.js';
import { findCommand } from './commands.js';
import { imageHandledTasks, imagePackages, type PackageNeed } from './contents.js';
import { DISK_COMMANDS, type DiskFormat } from './disk-image.js';
import type { ManifestFile } from '../../core/manifest-format.js';
import type { Recipe } from './recipe.js';

const run = promisify(execFile);

/** Where the build writes, what it writes, and what its apt logs in with. */
export interface OutputOptions {
  readonly outputDir: string;
  /** File names start with it: NAME.tar, NAME.manifest.json, NAME.raw or NAME.qcow2. */
  readonly name: string;
  /** Also write a bootable disk image of the same tree, in this format; null for none. */
  readonly diskFormat: DiskFormat | null;
  /** A directory holding prebuilt tagsched-worker.mjs and tagsched-handler.mjs; null builds them from src/. */
  readonly bundlesDir: string | null;
  /** An apt auth.conf file (netrc format, apt_auth.conf(5)) that the build's apt logs in to the archives with; null for none. Not in the recipe. */
  readonly aptAuth: string | null;
}

/** The output files of a build. */
export function outputPaths(options: OutputOptions) {
  const base = path.join(options.outputDir, options.name);
  return {
    rootfs: `${base}.tar`,
    manifest: `${base}.manifest.json`,
    diskImage: options.diskFormat ? `${base}.${options.diskFormat}` : null,
  };
}

/** The default image name: what it is for, and where it runs. */
export function defaultImageName(recipe: Recipe): string {
  return `tagsched-worker-${recipe.suite}-${recipe.architecture}`;
}

/** The host cannot build this image; `problems` says what is missing, all at once. */
export class HostError extends Error {
  override readonly name = 'HostError';
  constructor(readonly problems: readonly string[]) {
    super(`cannot build here:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
}

async function commandVersion(command: string, args: string[]): Promise<string | null> {
  try {
    const { stdout } = await run(command, args, { timeout: 30_000 });
    return stdout.trim();
  } catch {
    return null;
  }
}

/** What the host offers the build. */
export interface HostFacts {
  readonly mmdebstrap: string;
  /** How the image boots, when a disk image is asked for. */
  readonly boot: ArchitectureBoot | null;
}

/**
 * How the image boots when a disk image is asked for (null without one), and the problems of the
 * flags that say what the build makes and with what: an architecture no disk is built for, an apt
 * auth file that cannot be read. Checked by a dry run as by a build.
 */
export function planProblems(
  recipe: Recipe,
  options: Pick<OutputOptions, 'diskFormat' | 'aptAuth'>,
): { boot: ArchitectureBoot | null; problems: string[] } {
  const problems: string[] = [];
  const boot = options.diskFormat ? architectureBoot(recipe.architecture) : null;
  if (options.diskFormat && !boot)
    problems.push(`--disk-image: no bootable disk is built for ${recipe.architecture} (only amd64 and arm64)`);
  if (options.aptAuth) {
    try {
      if (!fs.statSync(options.aptAuth).isFile()) problems.push(`--apt-auth: ${options.aptAuth} is not a file`);
      else fs.accessSync(options.aptAuth, fs.constants.R_OK);
    } catch (err) {
      problems.push(`--apt-auth: cannot read ${options.aptAuth} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  return { boot, problems };
}

/** Checks, before any work, that this host can build the image; throws a HostError naming every gap. */
export async function checkHost(recipe: Recipe, options: OutputOptions): Promise<HostFacts> {
  const { boot, problems } = planProblems(recipe, options);
  const mmdebstrap = await commandVersion('mmdebstrap', ['--version']);
  if (!mmdebstrap) problems.unshift('mmdebstrap is not installed (apt-get install mmdebstrap uidmap arch-test)');
  if (recipe.source) {
    for (const stanza of parseAptSource(recipe.source).stanzas) {
      for (const key of stanza.keyFiles)
        if (!fs.existsSync(key))
          problems.push(`source: Signed-By names ${key}, which is not on this machine to copy into the image`);
    }
  }
  if (options.diskFormat) {
    for (const [name, debianPackage] of DISK_COMMANDS[options.diskFormat]) {
      if (!findCommand(name)) problems.push(`--disk-image needs ${name} (apt-get install ${debianPackage})`);
    }
    if (process.getuid?.() !== 0)
      problems.push('--disk-image needs root, to unpack the tree with its owners and run GRUB inside it');
  }
  if (options.bundlesDir) {
    for (const b of Object.values(BUNDLES)) {
      for (const file of [
        path.join(options.bundlesDir, b.outFile),
        path.join(options.bundlesDir, `${b.outFile}.LICENSES`),
      ]) {
        if (!fs.existsSync(file)) problems.push(`--bundles: ${file} is missing (npm run build makes it)`);
      }
    }
  }
  try {
    fs.mkdirSync(options.outputDir, { recursive: true });
    fs.accessSync(options.outputDir, fs.constants.W_OK);
  } catch (err) {
    problems.push(`cannot write to ${options.outputDir}: ${(err as Error).message}`);
  }
  if (problems.length) throw new HostError(problems);
  return { mmdebstrap: mmdebstrap!.replace(/^mmdebstrap\s+/, ''), boot };
}

/** The files staged for mmdebstrap's hooks to copy into the image. */
export interface StagedFiles {
  readonly dir: string;
  readonly agent: string;
  readonly handler: string;
  /** The license notices of both bundles, one file. */
  readonly licenses: string;
  readonly unit: string;
  readonly imageEnv: string;
  readonly source: string | null;
  /** The apt auth.conf file on this host (not copied into the stage): a setup hook puts it where apt reads it, a customize hook removes it. */
  readonly aptAuth: string | null;
  /** Where the hook copies the built tree's dpkg status. */
  readonly dpkgStatus: string;
  /** The files that make the tree boot, for a disk image. */
  readonly boot: StagedBootFiles | null;
}

/** The staged files of a bootable tree, and what they were written for. */
export interface StagedBootFiles {
  readonly boot: ArchitectureBoot;
  readonly ids: DiskIds;
  readonly grubConfig: string;
  readonly grubEarlyConfig: string;
  readonly fstab: string;
  readonly cloudConfig: string;
}

/** What a bootable image is built with: how its architecture boots, and the disk's identities. */
export interface BootBuild {
  readonly boot: ArchitectureBoot;
  readonly ids: DiskIds;
}

/** Where stageFiles writes each file in `dir`, and the apt auth file the hooks take from this host. Pure: a dry run prints the command line with these. */
export function stagedPaths(
  recipe: Recipe,
  dir: string,
  bootBuild: BootBuild | null = null,
  aptAuth: string | null = null,
): StagedFiles {
  const at = (name: string) => path.join(dir, name);
  return {
    dir,
    agent: path.join(dir, 'bundles', BUNDLES.agent.outFile),
    handler: path.join(dir, 'bundles', BUNDLES.handler.outFile),
    licenses: at('LICENSES'),
    unit: at('tagsched-worker.service'),
    imageEnv: at('image.env'),
    source: recipe.source ? at('extra.sources') : null,
    aptAuth,
    dpkgStatus: at('dpkg-status'),
    boot: bootBuild && {
      ...bootBuild,
      grubConfig: at('grub.cfg'),
      grubEarlyConfig: at('grub-early.cfg'),
      fstab: at('fstab'),
      cloudConfig: at('cloud.cfg'),
    },
  };
}

/** Writes the agent, the handler, the unit, image.env, the extra source and the boot files (for a disk) where stagedPaths says. */
export async function stageFiles(
  recipe: Recipe,
  dir: string,
  bundlesDir: string | null,
  bootBuild: BootBuild | null = null,
  aptAuth: string | null = null,
): Promise<StagedFiles> {
  const staged = stagedPaths(recipe, dir, bootBuild, aptAuth);
  const bundles = path.dirname(staged.agent);
  fs.mkdirSync(bundles, { recursive: true });
  if (bundlesDir) {
    for (const b of Object.values(BUNDLES)) {
      for (const name of [b.outFile, `${b.outFile}.LICENSES`])
        fs.copyFileSync(path.join(bundlesDir, name), path.join(bundles, name));
    }
  } else {
    await buildBundles(bundles);
  }
  const licenses = Object.values(BUNDLES)
    .map((b) => fs.readFileSync(path.join(bundles, `${b.outFile}.LICENSES`), 'utf8'))
    .join('\n');
  fs.writeFileSync(staged.licenses, licenses);
  fs.writeFileSync(staged.unit, agentUnit());
  fs.writeFileSync(
    staged.imageEnv,
    imageEnvFile({ suite: recipe.suite, architecture: recipe.architecture, tasks: imageHandledTasks(recipe) }),
  );
  if (staged.source && recipe.source) fs.writeFileSync(staged.source, recipe.source);
  if (staged.boot) {
    fs.writeFileSync(staged.boot.grubConfig, grubConfig(staged.boot.boot, staged.boot.ids));
    fs.writeFileSync(staged.boot.grubEarlyConfig, grubEarlyConfig(staged.boot.ids));
    fs.writeFileSync(staged.boot.fstab, fstab(staged.boot.ids));
    fs.writeFileSync(staged.boot.cloudConfig, cloudInitConfig(recipe.ssh_authorized_keys ?? []));
  }
  return staged;
}

/** The packages the build installs: the recipe's, and for a bootable disk the boot's (with an ssh server when the recipe has keys). */
export function plannedPackages(recipe: Recipe, boot: ArchitectureBoot | null): PackageNeed[] {
  const packages = imagePackages(recipe);
  if (!boot) return packages;
  const byName = new Map(packages.map((p) => [p.name, p]));
  for (const name of bootPackages(boot, Boolean(recipe.ssh_authorized_keys)))
    byName.set(name, { name, neededBy: [...(byName.get(name)?.neededBy ?? []), 'boot'] });
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** Where the recipe's extra source goes in the image. */
export const EXTRA_SOURCE_PATH = '/etc/apt/sources.list.d/tagsched-extra.sources';

/**
 * Where the apt auth file is during the build: mmdebstrap's apt (Dir set to the tree) reads the tree's
 * /etc/apt/auth.conf.d/*.conf, opened before apt drops its privileges, so mode 0600 does.
 */
export const BUILD_AUTH_PATH = '/etc/apt/auth.conf.d/tagsched-build.conf';

/**
 * The mmdebstrap command line (minbase, plus the packages of contents.ts and, for a bootable
 * disk, boot-files.ts): setup hooks add the extra source and its keys, and the apt auth file, before
 * apt's first update; customize hooks (after the last download) remove the auth file first, then
 * install the agent, its user, unit and settings, enable the unit, make the tree bootable when asked,
 * and copy the dpkg status out for the manifest. The auth file is not an --aptopt: those stay in the
 * image (/etc/apt/apt.conf.d/99mmdebstrap).
 */
export function mmdebstrapArgs(recipe: Recipe, staged: StagedFiles, rootfs: string): string[] {
  const args = [
    '--variant=minbase',
    `--architectures=${recipe.architecture}`,
    `--include=${plannedPackages(recipe, staged.boot?.boot ?? null)
      .map((p) => p.name)
      .join(',')}`,
  ];
  if (staged.source && recipe.source) {
    for (const stanza of parseAptSource(recipe.source).stanzas) {
      for (const key of stanza.keyFiles) {
        args.push(`--setup-hook=mkdir -p "$1${path.posix.dirname(key)}"`, `--setup-hook=upload ${key} ${key}`);
      }
    }
    args.push(`--setup-hook=upload ${staged.source} ${EXTRA_SOURCE_PATH}`);
  }
  if (staged.aptAuth) {
    args.push(
      `--setup-hook=mkdir -p "$1${path.posix.dirname(BUILD_AUTH_PATH)}"`,
      `--setup-hook=upload ${staged.aptAuth} ${BUILD_AUTH_PATH}`,
      `--setup-hook=chmod 0600 "$1${BUILD_AUTH_PATH}"`,
      `--customize-hook=rm -f "$1${BUILD_AUTH_PATH}"`,
    );
  }
  const { first, count } = SUBORDINATE_IDS;
  args.push(
    `--customize-hook=mkdir -p "$1${IMAGE_PATHS.libDir}" "$1${path.posix.dirname(IMAGE_PATHS.imageEnv)}" "$1${path.posix.dirname(IMAGE_PATHS.unit)}"`,
    `--customize-hook=upload ${staged.agent} ${IMAGE_PATHS.agent}`,
    `--customize-hook=upload ${staged.handler} ${IMAGE_PATHS.handler}`,
    `--customize-hook=upload ${staged.unit} ${IMAGE_PATHS.unit}`,
    `--customize-hook=upload ${staged.licenses} ${IMAGE_PATHS.licenses}`,
    `--customize-hook=upload ${staged.imageEnv} ${IMAGE_PATHS.imageEnv}`,
    `--customize-hook=chmod 0644 "$1${IMAGE_PATHS.agent}" "$1${IMAGE_PATHS.handler}" "$1${IMAGE_PATHS.licenses}" "$1${IMAGE_PATHS.unit}" "$1${IMAGE_PATHS.imageEnv}"`,
    `--customize-hook=chroot "$1" useradd --system --user-group --home-dir ${IMAGE_PATHS.home} --create-home --shell /usr/sbin/nologin ${AGENT_USER}`,
  );
  if (recipe.enable_backends.includes('unshare')) {
    const range = `${first}-${first + count - 1}`;
    args.push(`--customize-hook=chroot "$1" usermod --add-subuids ${range} --add-subgids ${range} ${AGENT_USER}`);
  }
  args.push(`--customize-hook=chroot "$1" systemctl enable ${path.posix.basename(IMAGE_PATHS.unit)}`);
  if (staged.boot) args.push(...bootHooks(staged.boot, Boolean(recipe.ssh_authorized_keys)));
  args.push(`--customize-hook=download /var/lib/dpkg/status ${staged.dpkgStatus}`);
  args.push(recipe.suite, rootfs);
  if (recipe.mirror) args.push(recipe.mirror);
  return args;
}

/**
 * The customize hooks of a bootable tree: its GRUB configuration, fstab and cloud-init settings,
 * GRUB's BIOS and EFI images made by the tree's own grub-mkimage (so the host needs no GRUB),
 * systemd-networkd enabled for the DHCP that cloud-init configures, and with an ssh server the
 * host keys its package made removed: every machine gets its own from cloud-init on first boot.
 */
function bootHooks(staged: StagedBootFiles, ssh: boolean): string[] {
  const { bios, efi } = staged.boot;
  const dirs = [
    path.posix.dirname(BOOT_PATHS.grubConfig),
    BOOT_PATHS.efiDir,
    path.posix.dirname(BOOT_PATHS.cloudConfig),
    ...(bios ? [path.posix.dirname(BOOT_PATHS.biosCore)] : []),
  ];
  const hooks = [
    `--customize-hook=mkdir -p ${dirs.map((d) => `"$1${d}"`).join(' ')}`,
    `--customize-hook=upload ${staged.grubConfig} ${BOOT_PATHS.grubConfig}`,
    `--customize-hook=upload ${staged.grubEarlyConfig} ${BOOT_PATHS.grubEarlyConfig}`,
    `--customize-hook=upload ${staged.fstab} ${BOOT_PATHS.fstab}`,
    `--customize-hook=upload ${staged.cloudConfig} ${BOOT_PATHS.cloudConfig}`,
  ];
  if (bios)
    hooks.push(
      `--customize-hook=chroot "$1" grub-mkimage ${grubMkimageArgs(bios.target, BOOT_PATHS.biosCore).join(' ')}`,
    );
  hooks.push(
    `--customize-hook=chroot "$1" grub-mkimage ${grubMkimageArgs(efi.target, path.posix.join(BOOT_PATHS.efiDir, efi.fileName)).join(' ')}`,
    '--customize-hook=chroot "$1" systemctl enable systemd-networkd.service',
  );
  if (ssh) hooks.push('--customize-hook=rm -f "$1"/etc/ssh/ssh_host_*');
  return hooks;
}

/** Size, and sha256, of a written file. */
export async function describeFile(file: string, relativeTo: string): Promise<ManifestFile> {
  const hash = crypto.createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return { path: path.relative(relativeTo, file), bytes: fs.statSync(file).size, sha256: hash.digest('hex') };
}
