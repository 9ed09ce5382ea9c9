/**
 * What an image holds, decided from its recipe alone (docs/design.md: images): the Debian packages each
 * backend and task needs, the task handlers the agent is started with, and the tags a worker
 * booted from the image reports. Pure: the build installs these packages and, for a bootable disk,
 * boot-files.ts's (build.ts plannedPackages: the one list `--dry-run` prints and mmdebstrap is given).
 */
import { TOOLS } from '../../agent/facts.js';
import { findTask } from '../../core/tasks/registry.js';
import { isHandledTask, type HandledTask } from './handlers.js';
import type { ImageBackend, ImageTask, Recipe } from './recipe.js';

/** Packages every image has: the agent's runtime, its architecture probe, init and TLS roots. */
export const BASE_PACKAGES = ['arch-test', 'ca-certificates', 'nodejs', 'systemd-sysv'] as const;

/** The qemu-system package that emulates (and with KVM runs) each architecture family. */
export function qemuSystemPackage(architecture: string): string {
  if (architecture === 'amd64' || architecture === 'i386') return 'qemu-system-x86';
  if (architecture === 'arm64' || architecture === 'armhf' || architecture === 'armel') return 'qemu-system-arm';
  if (architecture === 'ppc64el' || architecture === 'ppc64' || architecture === 'powerpc') return 'qemu-system-ppc';
  if (architecture === 's390x') return 'qemu-system-s390x';
  if (architecture.startsWith('mips')) return 'qemu-system-mips';
  return 'qemu-system-misc'; // riscv64, loong64 and the rest
}

/** What each backend needs installed; `unshare` needs `ip` for its network namespace and subordinate ids for builds. */
export const BACKEND_PACKAGES: Readonly<Record<ImageBackend, (architecture: string) => readonly string[]>> = {
  unshare: () => ['util-linux', 'iproute2', 'uidmap', 'xz-utils'],
  'incus-lxc': () => ['incus'],
  'incus-vm': (arch) => ['incus', qemuSystemPackage(arch)],
  qemu: (arch) => [qemuSystemPackage(arch), 'qemu-utils'],
};

/**
 * What each task needs installed: sbuild's unshare mode makes the build's chroot with mmdebstrap (without
 * it sbuild stops: "UNSHARE_MMDEBSTRAP_AUTO_CREATE requires mmdebstrap"); simplesystemimagebuild
 * bootstraps with mmdebstrap, which its analysis requires.
 */
export const TASK_PACKAGES: Readonly<Record<ImageTask, readonly string[]>> = {
  sbuild: ['sbuild', 'mmdebstrap'],
  autopkgtest: ['autopkgtest'],
  mmdebstrap: ['mmdebstrap', 'debootstrap', 'arch-test'],
  simplesystemimagebuild: ['debvm', 'dosfstools', 'e2fsprogs', 'fdisk', 'mtools', 'parted', 'qemu-utils', 'mmdebstrap'],
  debsign: ['devscripts', 'gnupg'],
  sign: ['sbsigntool', 'gnupg'],
};

/** The package that puts each tool the agent detects (src/agent/facts.ts TOOLS) in PATH. */
export const TOOL_PACKAGES: Readonly<Record<(typeof TOOLS)[number], string>> = {
  sbuild: 'sbuild',
  autopkgtest: 'autopkgtest',
  mmdebstrap: 'mmdebstrap',
  debsign: 'devscripts',
  sbsign: 'sbsigntool',
};

/** Backends that the agent reports only on a machine with /dev/kvm (src/agent/facts.ts). */
const NEEDS_KVM: readonly ImageBackend[] = ['incus-vm', 'qemu'];

/** One package and the parts of the recipe that need it. */
export interface PackageNeed {
  readonly name: string;
  /** `base`, `backend:unshare`, `task:sbuild`, … */
  readonly neededBy: readonly string[];
}

/** The packages of an image, sorted by name, each with what needs it. */
export function imagePackages(recipe: Recipe): PackageNeed[] {
  const needs = new Map<string, string[]>();
  const add = (names: readonly string[], by: string) => {
    for (const name of names) needs.set(name, [...(needs.get(name) ?? []), by]);
  };
  add(BASE_PACKAGES, 'base');
  for (const backend of recipe.enable_backends)
    add(BACKEND_PACKAGES[backend](recipe.architecture), `backend:${backend}`);
  for (const task of recipe.enable_tasks) add(TASK_PACKAGES[task], `task:${task}`);
  return [...needs.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, neededBy]) => ({ name, neededBy }));
}

/** The tasks the agent of an image has a handler for: noop (a smoke test), then the recipe's tasks that have one. */
export function imageHandledTasks(recipe: Recipe): HandledTask[] {
  return ['noop', ...recipe.enable_tasks.filter((task): task is ImageTask & HandledTask => isHandledTask(task))];
}

/** The recipe's tasks that bring their tools but no handler (they need artifacts tagsched cannot fetch yet). */
export function imageUnhandledTasks(recipe: Recipe): ImageTask[] {
  return recipe.enable_tasks.filter((task) => !isHandledTask(task));
}

/** One tag an image provides: where it comes from, and the condition on the machine when there is one. */
export interface ImageTag {
  readonly tag: string;
  /** `recipe:architecture`, `backend:unshare`, `package:sbuild`, `handler:sbuild`. */
  readonly source: string;
  readonly condition?: string;
}

/**
 * The tags a worker booted from the image reports, as the server derives them from its metadata
 * (src/core/tags/worker-tags.ts): its architecture, its backends, the tools of its packages and the
 * tasks it has handlers for. `installed` is the image's package list once built; before that (a
 * dry run) the planned packages stand in for it. arch-test may add architectures the machine runs
 * natively (i386 on most amd64 kernels): those depend on the machine, not the image.
 */
export function imageTags(
  recipe: Recipe,
  installed: ReadonlySet<string> = new Set(imagePackages(recipe).map((p) => p.name)),
): ImageTag[] {
  const tags: ImageTag[] = [{ tag: `worker:build-arch:${recipe.architecture}`, source: 'recipe:architecture' }];
  for (const backend of recipe.enable_backends) {
    tags.push({
      tag: `worker:executor:${backend}`,
      source: `backend:${backend}`,
      ...(NEEDS_KVM.includes(backend) ? { condition: 'the machine has /dev/kvm' } : {}),
    });
  }
  for (const tool of TOOLS) {
    if (installed.has(TOOL_PACKAGES[tool]))
      tags.push({ tag: `worker:cap:${tool}`, source: `package:${TOOL_PACKAGES[tool]}` });
  }
  for (const name of imageHandledTasks(recipe)) {
    const task = findTask('worker', name);
    if (!task) throw new Error(`task ${name} has a handler but is not in the task registry`);
    tags.push({ tag: `worker:task:${task.type}:${task.name}:version:${task.version}`, source: `handler:${name}` });
  }
  return tags;
}
