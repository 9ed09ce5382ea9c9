/**
 * Assembles a bootable disk image from a built root file system tarball, without loop devices
 * (containers and CI machines often have none) and without the host's GRUB: each partition is
 * made as a file (mkfs.ext4 -d for the root, mkfs.vfat and mtools' mcopy for the EFI system
 * partition), sfdisk writes the GPT into the disk file, dd copies the partitions in, and GRUB's
 * BIOS images (built inside the tree by the image's own GRUB, build.ts) are patched and written
 * as grub-bios-setup would. qemu-img converts the result to qcow2 when asked. The steps are
 * `DiskStage`s so that the CLI shows one progress line each; the layout is disk-layout.ts's.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  BOOT_PATHS,
  CLOUD_INIT_DATASOURCES,
  ESP_LABEL,
  ROOT_LABEL,
  type ArchitectureBoot,
  type DiskIds,
} from './boot-files.js';
import { findCommand, runStreaming } from './commands.js';
import { biosBootCode, diskLayout, partition, SECTOR_BYTES, sfdiskScript, type DiskLayout } from './disk-layout.js';
import type { ManifestBoot } from '../../core/manifest-format.js';

const run = promisify(execFile);

/** The formats a disk image is written in. */
export const DISK_FORMATS = ['raw', 'qcow2'] as const;
export type DiskFormat = (typeof DISK_FORMATS)[number];

/** The host commands a disk image needs, with the Debian package of each. */
export const DISK_COMMANDS: Readonly<
  Record<DiskFormat, readonly (readonly [command: string, debianPackage: string])[]>
> = {
  raw: [
    ['mkfs.ext4', 'e2fsprogs'],
    ['mkfs.vfat', 'dosfstools'],
    ['mcopy', 'mtools'],
    ['sfdisk', 'fdisk'],
  ],
  qcow2: [
    ['mkfs.ext4', 'e2fsprogs'],
    ['mkfs.vfat', 'dosfstools'],
    ['mcopy', 'mtools'],
    ['sfdisk', 'fdisk'],
    ['qemu-img', 'qemu-utils'],
  ],
};

/** Free room in the root file system beyond its tree: a first boot's logs, apt lists and a build's unpack, before it grows to its disk. */
const ROOT_HEADROOM_MIB = 1024;

/** What a disk image is made from and into. */
export interface DiskJob {
  readonly rootfs: string;
  readonly output: string;
  readonly format: DiskFormat;
  readonly boot: ArchitectureBoot;
  readonly ids: DiskIds;
  /** A directory of its own to work in: the unpacked tree and the partition files. */
  readonly scratchDir: string;
}

/** What the stages learn on the way. */
export interface DiskFacts {
  /** The kernel's release (`6.12.48+deb13-cloud-amd64`), from the tree's /boot. */
  kernel?: string;
  layout?: DiskLayout;
}

/** One stage of the assembly: a title for the progress line, and its work. */
export interface DiskStage {
  readonly title: string;
  readonly run: (facts: DiskFacts, onLine: (line: string) => void) => Promise<void>;
}

const command = (name: string) => findCommand(name) ?? name;

/** The one kernel in the tree's /boot, by its release; throws when there is none or several. */
export function treeKernel(tree: string): string {
  const kernels = fs
    .readdirSync(path.join(tree, 'boot'))
    .filter((f) => f.startsWith('vmlinuz-'))
    .map((f) => f.slice('vmlinuz-'.length));
  if (kernels.length !== 1)
    throw new Error(
      `the image's /boot holds ${kernels.length} kernels (${kernels.join(', ') || 'none'}); a bootable image has one`,
    );
  return kernels[0];
}

/** The stages that turn the tarball into the disk image `job.output`. */
export function diskStages(job: DiskJob): DiskStage[] {
  const tree = path.join(job.scratchDir, 'tree');
  const rootFile = path.join(job.scratchDir, 'root.ext4');
  const espFile = path.join(job.scratchDir, 'esp.vfat');
  const rawFile = job.format === 'raw' ? job.output : path.join(job.scratchDir, 'disk.raw');
  const hasBios = job.boot.bootModes.includes('bios');
  const stages: DiskStage[] = [
    {
      title: 'Unpack the tree and find its kernel',
      run: async (facts, onLine) => {
        fs.rmSync(tree, { recursive: true, force: true });
        fs.mkdirSync(tree, { recursive: true });
        await runStreaming(
          'tar',
          ['--extract', '--numeric-owner', '--preserve-permissions', '--file', job.rootfs, '--directory', tree],
          onLine,
        );
        facts.kernel = treeKernel(tree);
      },
    },
    {
      title: `Make the root file system (ext4, ${ROOT_HEADROOM_MIB} MiB free)`,
      run: async (facts, onLine) => {
        const { stdout } = await run('du', ['--summarize', '--block-size=1M', tree]);
        const sizeMib = Number(stdout.split(/\s+/)[0]) + ROOT_HEADROOM_MIB;
        fs.rmSync(rootFile, { force: true });
        await runStreaming(
          command('mkfs.ext4'),
          ['-q', '-L', ROOT_LABEL, '-U', job.ids.rootUuid, '-d', tree, rootFile, `${sizeMib}M`],
          onLine,
        );
        facts.layout = diskLayout(job.boot.bootModes, job.boot.rootPartitionType, fs.statSync(rootFile).size);
      },
    },
    {
      title: `Make the EFI system partition (${job.boot.efi.fileName})`,
      run: async (facts, onLine) => {
        const esp = partition(facts.layout!, 'esp');
        fs.rmSync(espFile, { force: true });
        await runStreaming(
          command('mkfs.vfat'),
          ['-F', '32', '-n', ESP_LABEL, '-C', espFile, String(esp.bytes / 1024)],
          onLine,
        );
        const env = { ...process.env, MTOOLS_SKIP_CHECK: '1' };
        await run(command('mmd'), ['-i', espFile, '::/EFI', '::/EFI/BOOT'], { env });
        const efiApp = path.join(tree, BOOT_PATHS.efiDir, job.boot.efi.fileName);
        await run(command('mcopy'), ['-i', espFile, efiApp, `::/EFI/BOOT/${job.boot.efi.fileName}`], { env });
      },
    },
    {
      title: `Partition the disk (GPT${hasBios ? ', GRUB for BIOS' : ''}) and copy the partitions in`,
      run: async (facts, onLine) => {
        const layout = facts.layout!;
        fs.rmSync(rawFile, { force: true });
        fs.writeFileSync(rawFile, '');
        fs.truncateSync(rawFile, layout.diskBytes);
        await runWithInput(
          command('sfdisk'),
          ['--quiet', '--no-reread', '--no-tell-kernel', rawFile],
          sfdiskScript(layout),
        );
        const copies: [string, number][] = [
          [espFile, partition(layout, 'esp').offsetBytes],
          [rootFile, partition(layout, 'root').offsetBytes],
        ];
        for (const [file, offset] of copies) {
          await runStreaming(
            'dd',
            [`if=${file}`, `of=${rawFile}`, 'bs=1M', `seek=${offset / 2 ** 20}`, 'conv=notrunc,sparse', 'status=none'],
            onLine,
          );
        }
        if (hasBios) {
          const coreSector = partition(layout, 'bios-boot').offsetBytes / SECTOR_BYTES;
          const code = biosBootCode(
            fs.readFileSync(path.join(tree, BOOT_PATHS.biosBootSector)),
            fs.readFileSync(path.join(tree, BOOT_PATHS.biosCore)),
            coreSector,
          );
          const fd = fs.openSync(rawFile, 'r+');
          try {
            fs.writeSync(fd, code.mbrCode, 0, code.mbrCode.length, 0);
            fs.writeSync(fd, code.core, 0, code.core.length, coreSector * SECTOR_BYTES);
          } finally {
            fs.closeSync(fd);
          }
        }
        fs.rmSync(rootFile, { force: true });
        fs.rmSync(espFile, { force: true });
        fs.rmSync(tree, { recursive: true, force: true });
      },
    },
  ];
  if (job.format === 'qcow2') {
    stages.push({
      title: 'Convert the disk to qcow2',
      run: async (_facts, onLine) => {
        fs.rmSync(job.output, { force: true });
        await runStreaming(command('qemu-img'), ['convert', '-f', 'raw', '-O', 'qcow2', rawFile, job.output], onLine);
        fs.rmSync(rawFile, { force: true });
      },
    });
  }
  return stages;
}

/** Runs a command with `input` on its stdin; rejects with its stderr when it fails. */
function runWithInput(file: string, args: readonly string[], input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, [...args], (err, _stdout, stderr) =>
      err ? reject(new Error(`${path.basename(file)} failed: ${stderr || err.message}`)) : resolve(),
    );
    child.stdin!.end(input);
  });
}

/** The manifest's `boot` of a disk image the stages made. */
export function manifestBoot(job: DiskJob, facts: DiskFacts): ManifestBoot {
  if (!facts.kernel || !facts.layout) throw new Error('the disk image stages have not all run');
  return {
    format: job.format,
    diskBytes: facts.layout.diskBytes,
    kernel: facts.kernel,
    bootModes: [...job.boot.bootModes],
    partitions: facts.layout.partitions.map((p) => ({ ...p })),
    rootUuid: job.ids.rootUuid,
    cloudInitDatasources: [...CLOUD_INIT_DATASOURCES],
  };
}
