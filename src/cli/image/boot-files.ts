/**
 * What makes an image's tree boot on a cloud machine (docs/design.md: images), decided from the architecture
 * alone: the packages (the suite's cloud kernel, GRUB's BIOS and EFI images, cloud-init and its
 * partition grower, DHCP, time sync), the boot modes, and the text of the files the build writes
 * into the tree: GRUB's configuration, the fstab, and cloud-init's settings. Pure: the build
 * (build.ts, disk-image.ts) writes and assembles what this decides.
 */

/** The ways a machine's firmware can start the disk. */
export const BOOT_MODES = ['bios', 'uefi'] as const;
export type BootMode = (typeof BOOT_MODES)[number];

/** How one architecture boots: its kernel, its GRUB platforms and the consoles its clouds log. */
export interface ArchitectureBoot {
  readonly kernelPackage: string;
  readonly bootModes: readonly BootMode[];
  /** GRUB's PC BIOS platform, when the architecture has one. */
  readonly bios: { readonly package: string; readonly target: 'i386-pc' } | null;
  readonly efi: { readonly package: string; readonly target: string; readonly fileName: string };
  /** The discoverable-partitions type of its root partition (UAPI group's specification). */
  readonly rootPartitionType: string;
  /** Kernel consoles, the last one being /dev/console: where the clouds' serial logs read it. */
  readonly consoles: readonly string[];
}

/**
 * The architectures a bootable disk is built for: amd64 boots from BIOS (Hetzner, EC2's older
 * types) and UEFI (EC2's default); arm64 machines all boot from UEFI.
 */
export const ARCHITECTURE_BOOT: Readonly<Record<string, ArchitectureBoot>> = {
  amd64: {
    kernelPackage: 'linux-image-cloud-amd64',
    bootModes: ['bios', 'uefi'],
    bios: { package: 'grub-pc-bin', target: 'i386-pc' },
    efi: { package: 'grub-efi-amd64-bin', target: 'x86_64-efi', fileName: 'BOOTX64.EFI' },
    rootPartitionType: '4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709',
    consoles: ['tty0', 'ttyS0,115200'],
  },
  arm64: {
    kernelPackage: 'linux-image-cloud-arm64',
    bootModes: ['uefi'],
    bios: null,
    efi: { package: 'grub-efi-arm64-bin', target: 'arm64-efi', fileName: 'BOOTAA64.EFI' },
    rootPartitionType: 'B921B045-1DF0-41C3-AF44-4C6F280D3FAE',
    consoles: ['tty0', 'ttyAMA0,115200', 'ttyS0,115200'],
  },
};

/** The architecture's boot, or null when no bootable disk is built for it. */
export function architectureBoot(architecture: string): ArchitectureBoot | null {
  return Object.hasOwn(ARCHITECTURE_BOOT, architecture) ? ARCHITECTURE_BOOT[architecture] : null;
}

/**
 * Packages every bootable image adds to its recipe's: initramfs-tools and udev find the root file
 * system; cloud-init reads the user data, cloud-guest-utils' growpart and e2fsprogs' resize2fs
 * grow the root to the disk; systemd-networkd (enabled by the build) runs the DHCP cloud-init
 * configures, systemd-resolved its DNS, systemd-timesyncd the clock; dbus lets systemd-logind
 * run, which powers the machine off when its provider presses the (ACPI) power button.
 */
export const BOOT_PACKAGES = [
  'cloud-guest-utils',
  'cloud-init',
  'dbus',
  'e2fsprogs',
  'initramfs-tools',
  'systemd-resolved',
  'systemd-timesyncd',
  'udev',
] as const;

/** Added when the recipe gives ssh keys; without them the image has no ssh server at all. */
export const SSH_PACKAGES = ['openssh-server'] as const;

/** The packages a bootable image of this architecture adds, with or without ssh. */
export function bootPackages(boot: ArchitectureBoot, ssh: boolean): string[] {
  return [
    ...BOOT_PACKAGES,
    boot.kernelPackage,
    ...(boot.bios ? [boot.bios.package] : []),
    boot.efi.package,
    ...(ssh ? SSH_PACKAGES : []),
  ].sort();
}

/** The cloud-init data sources an image looks for, in order; `None` lets a machine without one boot. */
export const CLOUD_INIT_DATASOURCES = ['NoCloud', 'Ec2', 'Hetzner', 'None'] as const;

/** The root file system's label, and the EFI system partition's. */
export const ROOT_LABEL = 'tagsched-root';
export const ESP_LABEL = 'ESP';

/** The identities a disk is built with, chosen once per build so that the tree's files can name them. */
export interface DiskIds {
  /** The root file system's UUID (mkfs.ext4 -U). */
  readonly rootUuid: string;
}

/** Paths inside the image that the boot uses. */
export const BOOT_PATHS = {
  grubConfig: '/boot/grub/grub.cfg',
  /** The configuration built into GRUB's images: where to find the root and grub.cfg. */
  grubEarlyConfig: '/boot/grub/tagsched-early.cfg',
  /** GRUB's BIOS core image, copied into the BIOS boot partition. */
  biosCore: '/boot/grub/i386-pc/core.img',
  /** GRUB's BIOS boot sector, whose first 440 bytes go into the disk's first sector. */
  biosBootSector: '/usr/lib/grub/i386-pc/boot.img',
  /** The directory of GRUB's EFI application, copied into the EFI system partition. */
  efiDir: '/boot/grub/efi',
  cloudConfig: '/etc/cloud/cloud.cfg.d/90-tagsched.cfg',
  fstab: '/etc/fstab',
} as const;

/**
 * GRUB's modules, built into its images (no module directory is installed beside them): disk and
 * partition access, ext4, the search for the root, the configuration's commands, the serial
 * console and the Linux loader.
 */
const GRUB_MODULES = [
  'part_gpt',
  'ext2',
  'search',
  'search_fs_uuid',
  'normal',
  'configfile',
  'echo',
  'test',
  'linux',
  'serial',
  'terminal',
  'all_video',
  'gzio',
];

/** The grub-mkimage arguments of one platform's image, run inside the tree. */
export function grubMkimageArgs(target: string, output: string): string[] {
  const platform = target === 'i386-pc' ? ['biosdisk'] : ['fat'];
  return [
    '--format',
    target,
    '--output',
    output,
    '--config',
    BOOT_PATHS.grubEarlyConfig,
    '--prefix',
    '/boot/grub',
    ...platform,
    ...GRUB_MODULES,
  ];
}

/** The configuration built into GRUB's images: find the root file system by its UUID, then read grub.cfg from it. */
export function grubEarlyConfig(ids: DiskIds): string {
  return [
    `search --no-floppy --fs-uuid --set=root ${ids.rootUuid}`,
    'set prefix=($root)/boot/grub',
    'configfile $prefix/grub.cfg',
    '',
  ].join('\n');
}

/**
 * grub.cfg: the kernel and initramfs through the /vmlinuz and /initrd.img links, which the
 * kernel's packages move on an upgrade, so that the file never needs rewriting; GRUB's and the
 * kernel's messages on the serial console too. No menu and no countdown: the one entry boots at
 * once (a menu waiting on a countdown once stayed on a test machine's console for 15 minutes). A kernel panic restarts the machine after 10 s (`panic=10`)
 * rather than leaving it hung: a cloud machine comes back, and a qemu machine (run with
 * `-no-reboot`) exits, so that its instance ends and the pool replaces it.
 */
export function grubConfig(boot: ArchitectureBoot, ids: DiskIds): string {
  const consoles = boot.consoles.map((c) => `console=${c}`).join(' ');
  return [
    '# Written by tagsched-image. The links /vmlinuz and /initrd.img follow kernel upgrades.',
    'set default=0',
    'set timeout_style=hidden',
    'set timeout=0',
    'serial --unit=0 --speed=115200',
    'terminal_input console serial',
    'terminal_output console serial',
    `search --no-floppy --fs-uuid --set=root ${ids.rootUuid}`,
    "menuentry 'Debian GNU/Linux (tagsched worker)' {",
    `  linux /vmlinuz root=UUID=${ids.rootUuid} ro panic=10 ${consoles}`,
    '  initrd /initrd.img',
    '}',
    '',
  ].join('\n');
}

/** The fstab: the root file system by its UUID (the EFI system partition is not mounted: nothing updates it). */
export function fstab(ids: DiskIds): string {
  return ['# Written by tagsched-image.', `UUID=${ids.rootUuid} / ext4 defaults,errors=remount-ro 0 1`, ''].join('\n');
}

/**
 * cloud-init's settings: the data sources of the providers tagsched boots on, DHCP rendered for
 * systemd-networkd, the root partition and file system grown to the disk, no passwords, and the
 * recipe's ssh keys for root when it has any.
 */
export function cloudInitConfig(sshAuthorizedKeys: readonly string[]): string {
  const lines = [
    '# Written by tagsched-image: the providers it boots on, and what the first boot does.',
    `datasource_list: [${CLOUD_INIT_DATASOURCES.join(', ')}]`,
    'system_info:',
    '  network:',
    '    renderers: [networkd]',
    '    activators: [networkd]',
    'growpart:',
    '  mode: auto',
    "  devices: ['/']",
    'resize_rootfs: true',
    'ssh_pwauth: false',
  ];
  if (sshAuthorizedKeys.length) {
    lines.push(
      'disable_root: false',
      'ssh_authorized_keys:',
      ...sshAuthorizedKeys.map((key) => `  - ${JSON.stringify(key)}`),
    );
  }
  return `${lines.join('\n')}\n`;
}
