import { describe, expect, it } from 'vitest';
import {
  architectureBoot,
  ARCHITECTURE_BOOT,
  BOOT_PATHS,
  bootPackages,
  cloudInitConfig,
  fstab,
  grubConfig,
  grubEarlyConfig,
  grubMkimageArgs,
} from '../../src/cli/image/boot-files.js';
import { imagePackages } from '../../src/cli/image/contents.js';
import { parseRecipe, RecipeError } from '../../src/cli/image/recipe.js';
import { plannedPackages } from '../../src/cli/image/build.js';

const ids = { rootUuid: '3f1d2a9e-5b6c-4d7e-8f90-123456789abc' };

describe('what makes a tree boot', () => {
  it('boots amd64 from BIOS and UEFI, arm64 from UEFI, and nothing else', () => {
    expect(architectureBoot('amd64')?.bootModes).toEqual(['bios', 'uefi']);
    expect(architectureBoot('arm64')?.bootModes).toEqual(['uefi']);
    expect(architectureBoot('arm64')?.bios).toBeNull();
    expect(architectureBoot('riscv64')).toBeNull();
    expect(architectureBoot('toString')).toBeNull();
  });

  it("adds the cloud kernel, GRUB's images, cloud-init, growpart, DHCP and time sync; ssh only when asked", () => {
    const packages = bootPackages(ARCHITECTURE_BOOT.amd64, false);
    for (const name of [
      'linux-image-cloud-amd64',
      'grub-pc-bin',
      'grub-efi-amd64-bin',
      'cloud-init',
      'cloud-guest-utils',
      'systemd-resolved',
      'systemd-timesyncd',
      'initramfs-tools',
    ]) {
      expect(packages).toContain(name);
    }
    expect(packages).not.toContain('openssh-server');
    expect(bootPackages(ARCHITECTURE_BOOT.amd64, true)).toContain('openssh-server');
    expect(bootPackages(ARCHITECTURE_BOOT.arm64, false)).toEqual(
      expect.arrayContaining(['linux-image-cloud-arm64', 'grub-efi-arm64-bin']),
    );
    expect(bootPackages(ARCHITECTURE_BOOT.arm64, false)).not.toContain('grub-pc-bin');
  });

  it("installs the recipe's packages plus the boot's, each saying what needs it", () => {
    const recipe = parseRecipe({ enable_tasks: ['sbuild'] }, 'amd64');
    expect(plannedPackages(recipe, null)).toEqual(imagePackages(recipe));
    const planned = plannedPackages(recipe, ARCHITECTURE_BOOT.amd64);
    expect(planned.map((p) => p.name)).toEqual(
      [
        ...new Set([...imagePackages(recipe).map((p) => p.name), ...bootPackages(ARCHITECTURE_BOOT.amd64, false)]),
      ].sort(),
    );
    expect(planned.find((p) => p.name === 'cloud-init')!.neededBy).toEqual(['boot']);
    expect(planned.find((p) => p.name === 'sbuild')!.neededBy).toEqual(['task:sbuild']);
  });

  it('has GRUB find the root by its UUID and boot the kernel through the links that follow upgrades, on the serial console too', () => {
    expect(grubEarlyConfig(ids)).toBe(
      `search --no-floppy --fs-uuid --set=root ${ids.rootUuid}\nset prefix=($root)/boot/grub\nconfigfile $prefix/grub.cfg\n`,
    );
    const cfg = grubConfig(ARCHITECTURE_BOOT.amd64, ids);
    expect(cfg).toContain(`  linux /vmlinuz root=UUID=${ids.rootUuid} ro panic=10 console=tty0 console=ttyS0,115200\n`);
    expect(cfg).toContain('  initrd /initrd.img\n');
    expect(cfg).toContain('terminal_output console serial\n');
    expect(fstab(ids)).toContain(`UUID=${ids.rootUuid} / ext4 defaults,errors=remount-ro 0 1\n`);
  });

  it("builds GRUB's images with their modules inside, reading the early configuration", () => {
    const bios = grubMkimageArgs('i386-pc', BOOT_PATHS.biosCore);
    expect(bios.slice(0, 8)).toEqual([
      '--format',
      'i386-pc',
      '--output',
      BOOT_PATHS.biosCore,
      '--config',
      BOOT_PATHS.grubEarlyConfig,
      '--prefix',
      '/boot/grub',
    ]);
    expect(bios).toEqual(expect.arrayContaining(['biosdisk', 'part_gpt', 'ext2', 'search_fs_uuid', 'linux', 'serial']));
    expect(grubMkimageArgs('x86_64-efi', '/x.efi')).toEqual(expect.arrayContaining(['fat', 'part_gpt', 'ext2']));
    expect(grubMkimageArgs('x86_64-efi', '/x.efi')).not.toContain('biosdisk');
  });

  it('reads NoCloud, Ec2 and Hetzner user data, renders DHCP for networkd, grows the root, and adds ssh keys only when there are some', () => {
    const cfg = cloudInitConfig([]);
    expect(cfg).toContain('datasource_list: [NoCloud, Ec2, Hetzner, None]\n');
    expect(cfg).toContain('    renderers: [networkd]\n');
    expect(cfg).toContain("  devices: ['/']\n");
    expect(cfg).toContain('resize_rootfs: true\n');
    expect(cfg).toContain('ssh_pwauth: false\n');
    expect(cfg).not.toContain('ssh_authorized_keys');
    const key = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample admin@example.org';
    expect(cloudInitConfig([key])).toContain(`ssh_authorized_keys:\n  - "${key}"\n`);
  });

  it("takes the recipe's ssh keys: an ssh server and root's keys only when there are some", () => {
    const key = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample admin@example.org';
    const withKeys = parseRecipe({ ssh_authorized_keys: [key] }, 'amd64');
    expect(withKeys.ssh_authorized_keys).toEqual([key]);
    expect(plannedPackages(withKeys, ARCHITECTURE_BOOT.amd64).find((p) => p.name === 'openssh-server')).toEqual({
      name: 'openssh-server',
      neededBy: ['boot'],
    });
    expect(plannedPackages(withKeys, null).map((p) => p.name)).not.toContain('openssh-server');
    const without = parseRecipe({ ssh_authorized_keys: [] }, 'amd64');
    expect('ssh_authorized_keys' in without).toBe(false);
    expect(plannedPackages(without, ARCHITECTURE_BOOT.amd64).map((p) => p.name)).not.toContain('openssh-server');
    for (const bad of [
      'AAAAC3NzaC1lZDI1NTE5 admin',
      `${key}\nssh-rsa AAAA other`,
      'ssh-ed25519',
      'ssh-dss AAAAB3 old',
    ]) {
      try {
        parseRecipe({ ssh_authorized_keys: [bad] }, 'amd64');
        expect.unreachable(`accepted ${bad}`);
      } catch (err) {
        expect(err).toBeInstanceOf(RecipeError);
        expect((err as RecipeError).problems).toEqual([
          { field: 'ssh_authorized_keys[0]', message: expect.stringMatching(/OpenSSH public key line/) },
        ]);
      }
    }
  });
});
