/**
 * A small bootable-looking image for the publish tests: a raw disk of a few MiB (data blocks, an
 * all-zero stretch, a partial last block) and its manifest, as `tagsched-image build --disk-image`
 * writes them (the manifest made by the build's own functions, test/helpers/image-manifest.ts), in
 * a temporary output directory; optionally as qcow2 (qemu-img convert).
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { imageManifest } from '../helpers/image-manifest.js';

export interface PublishFixture {
  readonly dir: string;
  readonly name: string;
  /** The raw disk's bytes (what a cloud must end up holding). */
  readonly raw: Buffer;
  readonly manifestSha256: string;
  remove(): void;
}

const MIB = 2 ** 20;

export function makePublishImage(
  name: string,
  options: { format?: 'raw' | 'qcow2'; bootModes?: ('bios' | 'uefi')[]; architecture?: string } = {},
): PublishFixture {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-publish-test-'));
  // 5.25 MiB: random data in the first MiB, zeros, data at 3 MiB, and a partial last block.
  const raw = Buffer.alloc(5 * MIB + 256 * 1024);
  randomBytes(MIB).copy(raw, 0);
  randomBytes(300_000).copy(raw, 3 * MIB + 1000);
  randomBytes(1000).copy(raw, raw.length - 1000);
  const format = options.format ?? 'raw';
  const rawPath = path.join(dir, `${name}.raw`);
  fs.writeFileSync(rawPath, raw);
  let diskPath = rawPath;
  if (format === 'qcow2') {
    diskPath = path.join(dir, `${name}.qcow2`);
    execFileSync('qemu-img', ['convert', '-f', 'raw', '-O', 'qcow2', rawPath, diskPath]);
    fs.rmSync(rawPath);
  }
  const disk = fs.readFileSync(diskPath);
  const manifest = imageManifest(name, {
    architecture: options.architecture ?? 'amd64',
    enable_backends: ['unshare'],
    enable_tasks: ['sbuild'],
  });
  manifest.files.diskImage = {
    path: path.basename(diskPath),
    bytes: disk.length,
    sha256: createHash('sha256').update(disk).digest('hex'),
  };
  manifest.boot = {
    format,
    diskBytes: raw.length,
    kernel: '6.12.48+deb13-amd64',
    bootModes: options.bootModes ?? ['bios', 'uefi'],
    partitions: [{ number: 1, name: 'root', type: 'linux', offsetBytes: MIB, bytes: raw.length - MIB }],
    rootUuid: '0b4c4d5e-8f6a-4a3b-9c2d-1e0f2a3b4c5d',
    cloudInitDatasources: ['Ec2', 'Hetzner', 'NoCloud'],
  };
  const text = `${JSON.stringify(manifest, null, 2)}\n`;
  fs.writeFileSync(path.join(dir, `${name}.manifest.json`), text);
  return {
    dir,
    name,
    raw,
    manifestSha256: createHash('sha256').update(text).digest('hex'),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
