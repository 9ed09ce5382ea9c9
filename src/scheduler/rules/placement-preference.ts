/**
 * Which free worker gets a request (docs/design.md: placement quality): an order of preference among the feasible free
 * workers, never a filter. The rules are data, applied in order until one tells two workers apart,
 * so that the pass, the placement of a new request and the diagnosis (which names the rule that
 * decided) share one definition. The first and the last rule (static before pool, the oldest) are
 * also a SQL order (staticFirstSql), by which a placement reads its first free workers;
 * test/scheduler/rules/placement-preference.test.ts checks that it is the same order.
 */

import { CPU_SPEED_ALL_TAG } from '../../core/tags/host-speed.js';

/** The rules that order the free workers of a request, as data. */
export const PLACEMENT_RULES = {
  /** Static workers before pool workers, so that pools can shrink. */
  STATIC_BEFORE_POOL: 'STATIC_BEFORE_POOL',
  /** Heavy work (heavy-work.ts): the fastest host first, by its all-core speed score (a host without one last). */
  FASTEST_FOR_HEAVY: 'FASTEST_FOR_HEAVY',
  /** Heavy work (heavy-work.ts): the largest worker first (CPUs, then memory). */
  LARGEST_FOR_HEAVY: 'LARGEST_FOR_HEAVY',
  /** Other work: the smallest worker that fits first, so that large workers stay free for heavy work. */
  SMALLEST_FOR_LIGHT: 'SMALLEST_FOR_LIGHT',
  /** The worker that can run fewer task classes first: a specialist should not lose its only work to a generalist. */
  MOST_SPECIALISED: 'MOST_SPECIALISED',
  /** The oldest registration (the lowest worker id) first. */
  OLDEST: 'OLDEST',
} as const;
export type PlacementRule = (typeof PLACEMENT_RULES)[keyof typeof PLACEMENT_RULES];

const CPUS = 'worker:cpu-count=';
const MEMORY = 'worker:memory-gib=';
const SPEED = `${CPU_SPEED_ALL_TAG}=`;

/**
 * What the preference reads of a worker's provided tags, in one walk over them: its size (its CPUs,
 * then its memory in GiB) and its all-core speed score, each 0 when its valued tag is absent.
 */
export function placementFigures(providedTags: readonly string[]): { size: [number, number]; speed: number } {
  let cpus = 0;
  let memory = 0;
  let speed = 0;
  for (const t of providedTags) {
    if (t.startsWith(CPUS)) cpus = Number(t.slice(CPUS.length)) || 0;
    else if (t.startsWith(MEMORY)) memory = Number(t.slice(MEMORY.length)) || 0;
    else if (t.startsWith(SPEED)) speed = Number(t.slice(SPEED.length)) || 0;
  }
  return { size: [cpus, memory], speed };
}

/** A free worker as the preference sees it: pool or not, its speed and size, how many classes it may run, its id. */
export interface Preferable {
  readonly pooled: boolean;
  /** Its all-core speed score (`worker:cpu-speed-all`), 0 when unknown. */
  readonly speed: number;
  readonly size: readonly [number, number];
  readonly eligible: number;
  readonly id: number;
}

const bySize = (a: Preferable, b: Preferable) => a.size[0] - b.size[0] || a.size[1] - b.size[1];
const staticBeforePoolOrder = (a: Pick<Preferable, 'pooled'>, b: Pick<Preferable, 'pooled'>) =>
  Number(a.pooled) - Number(b.pooled);
const oldestOrder = (a: Pick<Preferable, 'id'>, b: Pick<Preferable, 'id'>) => a.id - b.id;
/** Each rule as a comparison: negative when it puts `a` first. */
const COMPARE: Record<PlacementRule, (a: Preferable, b: Preferable) => number> = {
  STATIC_BEFORE_POOL: staticBeforePoolOrder,
  FASTEST_FOR_HEAVY: (a, b) => b.speed - a.speed,
  LARGEST_FOR_HEAVY: (a, b) => -bySize(a, b),
  SMALLEST_FOR_LIGHT: bySize,
  MOST_SPECIALISED: (a, b) => a.eligible - b.eligible,
  OLDEST: oldestOrder,
};
const HEAVY_RULES: readonly PlacementRule[] = [
  'STATIC_BEFORE_POOL',
  'FASTEST_FOR_HEAVY',
  'LARGEST_FOR_HEAVY',
  'MOST_SPECIALISED',
  'OLDEST',
];
const LIGHT_RULES: readonly PlacementRule[] = [
  'STATIC_BEFORE_POOL',
  'SMALLEST_FOR_LIGHT',
  'MOST_SPECIALISED',
  'OLDEST',
];

/** The rules, in the order they apply, for heavy work or for other work. */
export const placementRules = (heavy: boolean): readonly PlacementRule[] => (heavy ? HEAVY_RULES : LIGHT_RULES);

/** The first rule that tells `a` and `b` apart for this kind of work, or null when none does (the same worker). */
export function decidingRule(heavy: boolean, a: Preferable, b: Preferable): PlacementRule | null {
  for (const rule of placementRules(heavy)) if (COMPARE[rule](a, b) !== 0) return rule;
  return null;
}

/**
 * The order in which free workers are offered a request: static before pool workers; the fastest, then
 * the largest first for heavy work, the smallest first for other work; the most specialised; the oldest.
 */
export const workerPreference = (heavy: boolean) => {
  const rules = placementRules(heavy).map((r) => COMPARE[r]);
  return (a: Preferable, b: Preferable): number => {
    for (const compare of rules) {
      const d = compare(a, b);
      if (d !== 0) return d;
    }
    return 0;
  };
};

/** {@link PLACEMENT_RULES}.STATIC_BEFORE_POOL then OLDEST as a SQL order over the worker table under `alias`. */
export const staticFirstSql = (alias: string) => `${alias}.pool_id is not null, ${alias}.id`;

/** The order of {@link staticFirstSql} in TypeScript: static before pool workers, then the oldest. */
export const staticFirst = (a: Pick<Preferable, 'pooled' | 'id'>, b: Pick<Preferable, 'pooled' | 'id'>): number =>
  staticBeforePoolOrder(a, b) || oldestOrder(a, b);

/** Static workers before pool workers, each kind in the order given (a stable sort by STATIC_BEFORE_POOL alone: demand serves idle slots so). */
export const staticBeforePool = <T extends { readonly poolId: number | null }>(workers: readonly T[]): T[] =>
  [...workers].sort((a, b) => staticBeforePoolOrder({ pooled: a.poolId !== null }, { pooled: b.poolId !== null }));
