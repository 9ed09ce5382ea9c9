/**
 * The partitioned disk of a bootable image, as numbers: a GPT with a BIOS boot partition (GRUB's
 * core image, for PC BIOS), an EFI system partition and the root file system last, so that
 * cloud-init's growpart can grow it to the machine's disk. Also the two patches that make GRUB's
 * BIOS images find each other, written here instead of by grub-install, which needs the disk as a
 * block device (a loop device) and the host's own GRUB. Pure: disk-image.ts writes the bytes.
 */
import type { BootMode } from './boot-files.js';

export const SECTOR_BYTES = 512;
const MIB = 2 ** 20;

/** GPT partition types. */
export const PARTITION_TYPES = {
  biosBoot: '21686148-6449-6E6F-744E-656564454649',
  efiSystem: 'C12A7328-F81F-11D2-BA4B-00A0C93EC93B',
} as const;

/** Partition sizes: GRUB's BIOS core image is about 100 KiB; the EFI application about 1 MiB. */
const BIOS_BOOT_BYTES = 3 * MIB;
const EFI_SYSTEM_BYTES = 124 * MIB;
/** Everything starts on a MiB boundary; the first MiB holds the protective MBR and the GPT. */
const FIRST_PARTITION_OFFSET = MIB;
/** Room at the end for the backup GPT (33 sectors), rounded to a MiB. */
const TRAILER_BYTES = MIB;

/** One partition of the disk. */
export interface Partition {
  readonly number: number;
  readonly name: 'bios-boot' | 'esp' | 'root';
  readonly type: string;
  readonly offsetBytes: number;
  readonly bytes: number;
}

/** The disk's partitions, in order, and its size. */
export interface DiskLayout {
  readonly partitions: readonly Partition[];
  readonly diskBytes: number;
}

const roundUpToMib = (bytes: number) => Math.ceil(bytes / MIB) * MIB;

/** The layout for these boot modes and a root file system of `rootBytes` (rounded up to a MiB). */
export function diskLayout(bootModes: readonly BootMode[], rootPartitionType: string, rootBytes: number): DiskLayout {
  const partitions: Partition[] = [];
  let offset = FIRST_PARTITION_OFFSET;
  const add = (name: Partition['name'], type: string, bytes: number) => {
    partitions.push({ number: partitions.length + 1, name, type, offsetBytes: offset, bytes });
    offset += bytes;
  };
  if (bootModes.includes('bios')) add('bios-boot', PARTITION_TYPES.biosBoot, BIOS_BOOT_BYTES);
  if (bootModes.includes('uefi')) add('esp', PARTITION_TYPES.efiSystem, EFI_SYSTEM_BYTES);
  add('root', rootPartitionType, roundUpToMib(rootBytes));
  return { partitions, diskBytes: offset + TRAILER_BYTES };
}

/** The partition of that name; throws when the layout has none (a bug: the boot modes decide). */
export function partition(layout: DiskLayout, name: Partition['name']): Partition {
  const found = layout.partitions.find((p) => p.name === name);
  if (!found) throw new Error(`the disk layout has no ${name} partition`);
  return found;
}

/** sfdisk's script for the layout (GPT, sizes in sectors). */
export function sfdiskScript(layout: DiskLayout): string {
  const lines = ['label: gpt', 'unit: sectors', `first-lba: ${FIRST_PARTITION_OFFSET / SECTOR_BYTES}`, ''];
  for (const p of layout.partitions) {
    lines.push(
      `start=${p.offsetBytes / SECTOR_BYTES}, size=${p.bytes / SECTOR_BYTES}, type=${p.type}, name="${p.name}"`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * Offsets in GRUB's i386-pc images (grub-core/boot/i386/pc/boot.S and diskboot.S, as grub-bios-setup
 * writes them): boot.img keeps the first sector of core.img at 0x5c, and skips its check of the
 * BIOS drive number (two NOPs at 0x66) on hard disks; core.img's first sector ends with a block
 * list: the start sector of the rest (8 bytes), its length in sectors (2) and its load segment (2).
 */
const BOOT_IMG = { kernelSector: 0x5c, driveCheck: 0x66, codeBytes: 440 } as const;
const CORE_BLOCKLIST = { offset: SECTOR_BYTES - 12, segment: 0x820 } as const;

/** The two pieces of GRUB's BIOS boot: the code of the disk's first sector, and core.img as it is written. */
export interface BiosBootCode {
  /** The first 440 bytes of the disk: boot.img's code, before the partition table. */
  readonly mbrCode: Buffer;
  /** core.img, its block list pointing at the sectors that follow its first. */
  readonly core: Buffer;
}

/**
 * Patches boot.img and core.img for core.img written at `coreSector` (the BIOS boot partition's
 * first sector), as grub-bios-setup does for a core image embedded in contiguous sectors.
 */
export function biosBootCode(bootImg: Buffer, coreImg: Buffer, coreSector: number): BiosBootCode {
  if (bootImg.length !== SECTOR_BYTES)
    throw new Error(`GRUB's boot.img is ${bootImg.length} bytes, not ${SECTOR_BYTES}`);
  const sectors = Math.ceil(coreImg.length / SECTOR_BYTES);
  if (sectors < 2) throw new Error(`GRUB's core.img is ${coreImg.length} bytes: too small to be one`);
  const mbr = Buffer.from(bootImg);
  mbr.writeBigUInt64LE(BigInt(coreSector), BOOT_IMG.kernelSector);
  mbr[BOOT_IMG.driveCheck] = 0x90;
  mbr[BOOT_IMG.driveCheck + 1] = 0x90;
  const core = Buffer.alloc(sectors * SECTOR_BYTES);
  coreImg.copy(core);
  core.writeBigUInt64LE(BigInt(coreSector + 1), CORE_BLOCKLIST.offset);
  core.writeUInt16LE(sectors - 1, CORE_BLOCKLIST.offset + 8);
  core.writeUInt16LE(CORE_BLOCKLIST.segment, CORE_BLOCKLIST.offset + 10);
  return { mbrCode: mbr.subarray(0, BOOT_IMG.codeBytes), core };
}
