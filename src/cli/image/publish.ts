/**
 * What `tagsched-image publish` shares between clouds: the image it publishes (a manifest and its
 * raw disk, read from the build's output directory), the names it gives what it makes, and the run
 * of a publisher's stages, which removes whatever the attempt made when a stage fails, so that a
 * failed publish leaves nothing behind and publishing again is one new attempt.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseManifest, type Manifest, type ManifestBoot } from '../../core/manifest-format.js';

/** A failure of publishing with a message fit for the user (no secret in it). */
export class PublishError extends Error {
  override readonly name = 'PublishError';
}

/** A local image ready to publish: its manifest, the manifest file's sha256, and its raw disk. */
export interface PublishImage {
  readonly name: string;
  readonly manifest: Manifest;
  readonly boot: ManifestBoot;
  /** The sha256 (hex) of NAME.manifest.json as written: labels and tags name it. */
  readonly manifestSha256: string;
  /** The disk as a raw file (the build's, or a qcow2 converted into a scratch directory). */
  readonly rawPath: string;
  /** The raw disk's size in bytes (the disk size a machine sees). */
  readonly rawBytes: number;
  /** Removes the scratch copy, if one was made. */
  dispose(): void;
}

async function fileSha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Reads NAME.manifest.json from `dir`, checks its disk image (present, its size and sha256 as the
 * manifest says) and, for a qcow2 disk, converts it to a raw scratch file with `qemu-img convert`.
 */
export async function openPublishImage(
  dir: string,
  name: string,
  report: (line: string) => void = () => {},
): Promise<PublishImage> {
  const manifestPath = path.join(dir, `${name}.manifest.json`);
  let text: Buffer;
  try {
    text = fs.readFileSync(manifestPath);
  } catch (err) {
    throw new PublishError(
      `cannot read ${manifestPath}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message} (give the build's --output directory with --images)`,
    );
  }
  let manifest: Manifest;
  try {
    manifest = parseManifest(JSON.parse(text.toString('utf8')));
  } catch (err) {
    throw new PublishError(`${manifestPath}: ${(err as Error).message}`);
  }
  const disk = manifest.files.diskImage;
  if (!disk || !manifest.boot)
    throw new PublishError(`${name} has no bootable disk image: build it with tagsched-image build --disk-image`);
  const diskPath = path.resolve(dir, disk.path);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(diskPath);
  } catch {
    throw new PublishError(`the disk image ${diskPath} named by the manifest is missing`);
  }
  if (stat.size !== disk.bytes)
    throw new PublishError(
      `the disk image ${diskPath} is ${stat.size} bytes, the manifest says ${disk.bytes}: it is not the image that was built`,
    );
  report(`checking the sha256 of ${path.basename(diskPath)}`);
  if ((await fileSha256(diskPath)) !== disk.sha256)
    throw new PublishError(
      `the disk image ${diskPath} does not have the sha256 the manifest says: it is not the image that was built`,
    );
  const manifestSha256 = createHash('sha256').update(text).digest('hex');
  if (manifest.boot.format === 'raw') {
    return {
      name: manifest.name,
      manifest,
      boot: manifest.boot,
      manifestSha256,
      rawPath: diskPath,
      rawBytes: stat.size,
      dispose: () => {},
    };
  }
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-publish-'));
  const rawPath = path.join(scratch, `${name}.raw`);
  report(`converting ${path.basename(diskPath)} to raw (qemu-img convert)`);
  try {
    await promisify(execFile)('qemu-img', ['convert', '-f', 'qcow2', '-O', 'raw', diskPath, rawPath]);
  } catch (err) {
    fs.rmSync(scratch, { recursive: true, force: true });
    throw new PublishError(
      `qemu-img convert of ${diskPath} failed: ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`,
    );
  }
  const rawBytes = fs.statSync(rawPath).size;
  return {
    name: manifest.name,
    manifest,
    boot: manifest.boot,
    manifestSha256,
    rawPath,
    rawBytes,
    dispose: () => fs.rmSync(scratch, { recursive: true, force: true }),
  };
}

/** One stage of a publisher: its title (a progress line) and its work. */
export interface PublishStage<S> {
  readonly title: string;
  run(state: S, report: (line: string) => void): Promise<void>;
}

/** A publisher's plan: its stages, its state, and the removal of what a failed attempt made. */
export interface PublishPlan<S> {
  readonly state: S;
  readonly stages: readonly PublishStage<S>[];
  /** Removes what the attempt made (and did not hand over); returns what it removed, and what it could not. */
  cleanUp(state: S): Promise<{ removed: string[]; left: string[] }>;
  /** The published id, after the last stage. */
  result(state: S): { providerImageId: string; region: string };
}

/**
 * Runs a plan's stages in order (`runStage` lets the CLI show each as progress); when one fails, it
 * removes what the attempt made and throws a PublishError that says what failed and what was removed.
 */
export async function runPublishPlan<S>(
  plan: PublishPlan<S>,
  runStage: (stage: PublishStage<S>, run: (report: (line: string) => void) => Promise<void>) => Promise<void> = (
    stage,
    run,
  ) => run(() => {}),
): Promise<{ providerImageId: string; region: string }> {
  try {
    for (const stage of plan.stages) await runStage(stage, (report) => stage.run(plan.state, report));
    return plan.result(plan.state);
  } catch (err) {
    throw await failedAttempt(plan, err);
  }
}

/** Removes what a failed attempt made; the error says what failed, and what was (not) removed. */
export async function failedAttempt<S>(plan: PublishPlan<S>, err: unknown): Promise<PublishError> {
  const { removed, left } = await plan.cleanUp(plan.state);
  const lines = [err instanceof Error ? err.message : String(err)];
  if (removed.length) lines.push(`removed what this attempt made: ${removed.join(', ')}`);
  if (left.length) lines.push(`could NOT remove: ${left.join(', ')} (delete them by hand)`);
  return new PublishError(lines.join('; '));
}
