/**
 * The size class of a worker (`worker:size:{small,medium,big}`), derived from its cpu count,
 * memory and disk. A class is reached only when all three resources reach its floor, so that a
 * task asking for a big worker never lands on a machine that is big in one way only.
 */

/** Bytes in one GiB, for turning reported byte counts into `worker:memory-gib` and `worker:disk-gib`. */
export const BYTES_PER_GIB = 1024 ** 3;

/** The least of each resource a class needs. */
export interface ResourceFloor {
  readonly cpuCount: number;
  readonly memoryGib: number;
  readonly diskGib: number;
}

/** The floors of the medium and big classes; anything below medium is small. */
export interface SizeThresholds {
  readonly medium: ResourceFloor;
  readonly big: ResourceFloor;
}

/** Default floors: medium from 4 CPUs, 8 GiB memory, 50 GiB disk; big from 16 CPUs, 32 GiB, 200 GiB. */
export const DEFAULT_SIZE_THRESHOLDS: SizeThresholds = {
  medium: { cpuCount: 4, memoryGib: 8, diskGib: 50 },
  big: { cpuCount: 16, memoryGib: 32, diskGib: 200 },
};

/** The three sizes of {@link sizeClass}, smallest first. */
export const SIZE_CLASSES = ['small', 'medium', 'big'] as const;
/** One of {@link SIZE_CLASSES}. */
export type SizeClass = (typeof SIZE_CLASSES)[number];

function reaches(facts: ResourceFloor, floor: ResourceFloor): boolean {
  return facts.cpuCount >= floor.cpuCount && facts.memoryGib >= floor.memoryGib && facts.diskGib >= floor.diskGib;
}

function known(value: number | undefined): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

/** Classifies a worker by its resources, or returns null when any of the three is unknown. */
export function sizeClass(
  facts: { cpuCount?: number; memoryGib?: number; diskGib?: number },
  t: SizeThresholds,
): SizeClass | null {
  const { cpuCount, memoryGib, diskGib } = facts;
  if (!known(cpuCount) || !known(memoryGib) || !known(diskGib)) return null;
  const resources = { cpuCount, memoryGib, diskGib };
  if (reaches(resources, t.big)) return 'big';
  if (reaches(resources, t.medium)) return 'medium';
  return 'small';
}
