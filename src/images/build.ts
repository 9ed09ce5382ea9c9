/**
 * Building an image: the host checks made before any work, the files staged for the image, the
 * mmdebstrap command line, and the steps after it (dpkg status → manifest, the disk image). The
 * CLI (src/cli/image.ts) runs these as stages; the decisions about content live in contents.ts.
 */
import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildBundles, BUNDLES } from '../packaging/bundles.js';
import { AGENT_USER, agentUnit, IMAGE_PATHS, imageEnvFile, SUBORDINATE_IDS } from './agent-files.js';
import { parseAptSource } from './apt-source.js';
import { imageHandledTasks, imagePackages } from './contents.js';
import type { ManifestFile } from './manifest-format.js';
import type { Recipe } from './recipe.js';

const run = promisify(execFile);

/** Where the build writes, and what it writes. */
export interface OutputOptions {
  readonly outputDir: string;
  /** File names start with it: NAME.tar, NAME.manifest.json, NAME.ext4. */
  readonly name: string;
  /** Also write NAME.ext4, an ext4 file system image of the same tree. */
  readonly diskImage: boolean;
  /** A directory holding prebuilt tagsched-worker.mjs and tagsched-handler.mjs; null builds them from src/. */
  readonly bundlesDir: string | null;
}

/** The output files of a build. */
export function outputPaths(options: OutputOptions) {
  const base = path.join(options.outputDir, options.name);
  return { rootfs: `${base}.tar`, manifest: `${base}.manifest.json`, diskImage: options.diskImage ? `${base}.ext4` : null };
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

/** The path of an executable in PATH or in the sbin directories (not in a user's PATH), or null. */
export function findCommand(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), '/usr/sbin', '/sbin'];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}

/** What the host offers the build. */
export interface HostFacts {
  readonly mmdebstrap: string;
}

/** Checks, before any work, that this host can build the image; throws a HostError naming every gap. */
export async function checkHost(recipe: Recipe, options: OutputOptions): Promise<HostFacts> {
  const problems: string[] = [];
  const mmdebstrap = await commandVersion('mmdebstrap', ['--version']);
  if (!mmdebstrap) problems.push('mmdebstrap is not installed (apt-get install mmdebstrap uidmap arch-test)');
  if (recipe.source) {
    for (const stanza of parseAptSource(recipe.source).stanzas) {
      for (const key of stanza.keyFiles) if (!fs.existsSync(key)) problems.push(`source: Signed-By names ${key}, which is not on this machine to copy into the image`);
    }
  }
  if (options.diskImage) {
    if (!findCommand('mkfs.ext4')) problems.push('--disk-image needs mkfs.ext4 (apt-get install e2fsprogs)');
    if (process.getuid?.() !== 0) problems.push('--disk-image needs root, to unpack the tree with its owners');
  }
  if (options.bundlesDir) {
    for (const b of Object.values(BUNDLES)) {
      for (const file of [path.join(options.bundlesDir, b.outFile), path.join(options.bundlesDir, `${b.outFile}.LICENSES`)]) {
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
  return { mmdebstrap: mmdebstrap!.replace(/^mmdebstrap\s+/, '') };
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
  /** Where the hook copies the built tree's dpkg status. */
  readonly dpkgStatus: string;
}

/** Writes the agent, the handler, the unit, image.env and the extra source into `dir`. */
export async function stageFiles(recipe: Recipe, dir: string, bundlesDir: string | null): Promise<StagedFiles> {
  fs.mkdirSync(dir, { recursive: true });
  const bundles = path.join(dir, 'bundles');
  if (bundlesDir) {
    fs.mkdirSync(bundles, { recursive: true });
    for (const b of Object.values(BUNDLES)) {
      for (const name of [b.outFile, `${b.outFile}.LICENSES`]) fs.copyFileSync(path.join(bundlesDir, name), path.join(bundles, name));
    }
  } else {
    await buildBundles(bundles);
  }
  const licenses = Object.values(BUNDLES)
    .map((b) => fs.readFileSync(path.join(bundles, `${b.outFile}.LICENSES`), 'utf8'))
    .join('\n');
  const write = (name: string, text: string) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };
  return {
    dir,
    agent: path.join(bundles, BUNDLES.agent.outFile),
    handler: path.join(bundles, BUNDLES.handler.outFile),
    licenses: write('LICENSES', licenses),
    unit: write('tagsched-worker.service', agentUnit()),
    imageEnv: write('image.env', imageEnvFile({ suite: recipe.suite, architecture: recipe.architecture, tasks: imageHandledTasks(recipe) })),
    source: recipe.source ? write('extra.sources', recipe.source) : null,
    dpkgStatus: path.join(dir, 'dpkg-status'),
  };
}

/** Where the recipe's extra source goes in the image. */
export const EXTRA_SOURCE_PATH = '/etc/apt/sources.list.d/tagsched-extra.sources';

/**
 * The mmdebstrap command line (minbase, plus the packages of contents.ts): setup hooks add the
 * extra source and its keys before apt's first update; customize hooks install the agent, its
 * user, unit and settings, enable the unit, and copy the dpkg status out for the manifest.
 */
export function mmdebstrapArgs(recipe: Recipe, staged: StagedFiles, rootfs: string): string[] {
  const args = [
    '--variant=minbase',
    `--architectures=${recipe.architecture}`,
    `--include=${imagePackages(recipe)
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
  args.push(`--customize-hook=chroot "$1" systemctl enable ${path.posix.basename(IMAGE_PATHS.unit)}`, `--customize-hook=download /var/lib/dpkg/status ${staged.dpkgStatus}`);
  args.push(recipe.suite, rootfs);
  if (recipe.mirror) args.push(recipe.mirror);
  return args;
}

/** Runs a command, handing each line of its output to `onLine`; rejects with its last lines when it fails. */
export function runStreaming(command: string, args: readonly string[], onLine: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const take = (stream: NodeJS.ReadableStream) => {
      let rest = '';
      stream.on('data', (d: Buffer) => {
        const lines = (rest + d.toString()).split(/\r?\n|\r/);
        rest = lines.pop() ?? '';
        for (const line of lines) {
          if (!line.trim()) continue;
          tail.push(line);
          if (tail.length > 30) tail.shift();
          onLine(line);
        }
      });
    };
    take(child.stdout!);
    take(child.stderr!);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} failed (${signal ?? `exit ${code}`}); its last lines:\n${tail.join('\n')}`));
    });
  });
}

/** Size, and sha256, of a written file. */
export async function describeFile(file: string, relativeTo: string): Promise<ManifestFile> {
  const hash = crypto.createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return { path: path.relative(relativeTo, file), bytes: fs.statSync(file).size, sha256: hash.digest('hex') };
}

/** Free room in a disk image beyond its tree: enough for a first boot's logs, apt lists and a build's unpack. */
const DISK_IMAGE_HEADROOM_MIB = 1024;

/** Makes an ext4 image of the tarball's tree (unpacked with owners, so root only). */
export async function makeDiskImage(rootfs: string, diskImage: string, scratchDir: string, onLine: (line: string) => void): Promise<void> {
  const tree = path.join(scratchDir, 'tree');
  fs.mkdirSync(tree, { recursive: true });
  try {
    await runStreaming('tar', ['--extract', '--numeric-owner', '--preserve-permissions', '--file', rootfs, '--directory', tree], onLine);
    const { stdout } = await run('du', ['--summarize', '--block-size=1M', tree]);
    const sizeMib = Number(stdout.split(/\s+/)[0]) + DISK_IMAGE_HEADROOM_MIB;
    fs.rmSync(diskImage, { force: true });
    await runStreaming(findCommand('mkfs.ext4') ?? 'mkfs.ext4', ['-q', '-L', 'tagsched-root', '-d', tree, diskImage, `${sizeMib}M`], onLine);
  } finally {
    fs.rmSync(tree, { recursive: true, force: true });
  }
}
