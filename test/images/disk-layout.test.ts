import { describe, expect, it } from 'vitest';
import { ARCHITECTURE_BOOT } from '../../src/cli/image/boot-files.js';
import {
  biosBootCode,
  diskLayout,
  PARTITION_TYPES,
  partition,
  SECTOR_BYTES,
  sfdiskScript,
} from '../../src/cli/image/disk-layout.js';

const MIB = 2 ** 20;

describe('the disk layout', () => {
  it('puts the BIOS boot and EFI system partitions first and the root last, on MiB boundaries, with room for the backup GPT', () => {
    const amd64 = ARCHITECTURE_BOOT.amd64;
    const layout = diskLayout(amd64.bootModes, amd64.rootPartitionType, 1000 * MIB + 1);
    expect(layout.partitions).toEqual([
      { number: 1, name: 'bios-boot', type: PARTITION_TYPES.biosBoot, offsetBytes: MIB, bytes: 3 * MIB },
      { number: 2, name: 'esp', type: PARTITION_TYPES.efiSystem, offsetBytes: 4 * MIB, bytes: 124 * MIB },
      { number: 3, name: 'root', type: amd64.rootPartitionType, offsetBytes: 128 * MIB, bytes: 1001 * MIB },
    ]);
    expect(layout.diskBytes).toBe(1130 * MIB);
    expect(partition(layout, 'root').number).toBe(3);
  });

  it('has no BIOS boot partition for an architecture that boots from UEFI only', () => {
    const arm64 = ARCHITECTURE_BOOT.arm64;
    const layout = diskLayout(arm64.bootModes, arm64.rootPartitionType, 512 * MIB);
    expect(layout.partitions.map((p) => [p.number, p.name])).toEqual([
      [1, 'esp'],
      [2, 'root'],
    ]);
    expect(() => partition(layout, 'bios-boot')).toThrow(/no bios-boot partition/);
  });

  it('is written for sfdisk in sectors', () => {
    const amd64 = ARCHITECTURE_BOOT.amd64;
    expect(sfdiskScript(diskLayout(amd64.bootModes, amd64.rootPartitionType, 100 * MIB))).toBe(
      [
        'label: gpt',
        'unit: sectors',
        'first-lba: 2048',
        '',
        `start=2048, size=6144, type=${PARTITION_TYPES.biosBoot}, name="bios-boot"`,
        `start=8192, size=253952, type=${PARTITION_TYPES.efiSystem}, name="esp"`,
        `start=262144, size=204800, type=${amd64.rootPartitionType}, name="root"`,
        '',
      ].join('\n'),
    );
  });
});

describe("GRUB's BIOS boot code", () => {
  const bootImg = Buffer.alloc(SECTOR_BYTES, 0xab);
  const coreImg = Buffer.alloc(3 * SECTOR_BYTES + 100, 0xcd);

  it("points boot.img at core.img's first sector, and core.img's block list at the rest", () => {
    const { mbrCode, core } = biosBootCode(bootImg, coreImg, 2048);
    expect(mbrCode.length).toBe(440);
    expect(mbrCode.readBigUInt64LE(0x5c)).toBe(2048n);
    expect([mbrCode[0x66], mbrCode[0x67]]).toEqual([0x90, 0x90]);
    expect(mbrCode[0]).toBe(0xab);
    expect(core.length).toBe(4 * SECTOR_BYTES);
    expect(core.readBigUInt64LE(500)).toBe(2049n);
    expect(core.readUInt16LE(508)).toBe(3);
    expect(core.readUInt16LE(510)).toBe(0x820);
    expect(core.subarray(SECTOR_BYTES, 3 * SECTOR_BYTES + 100).every((b) => b === 0xcd)).toBe(true);
    // The images it was given stay as they were.
    expect(bootImg.readBigUInt64LE(0x5c)).toBe(0xababababababababn);
  });

  it('refuses images that are not GRUB’s', () => {
    expect(() => biosBootCode(Buffer.alloc(100), coreImg, 2048)).toThrow(/boot.img is 100 bytes/);
    expect(() => biosBootCode(bootImg, Buffer.alloc(SECTOR_BYTES), 2048)).toThrow(/too small/);
  });
});
