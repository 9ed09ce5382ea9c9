/**
 * The host's speed scores as the agent reports them and the server keeps them: the tags they become,
 * their bound, and how a worker's tags are read back for placement (heavy work to the fastest host).
 * The benchmark itself is the agent's (src/agent/speed.ts); the ontology (ontology.ts) lets every
 * provenance give these tags, as it does worker:cpu-count.
 */

/** The valued tag of the single-core score. */
export const CPU_SPEED_TAG = 'worker:cpu-speed';
/** The valued tag of the all-core score: what heavy work is placed by. */
export const CPU_SPEED_ALL_TAG = 'worker:cpu-speed-all';

/** The highest score the server takes (a figure above it is refused as input, never stored). */
export const MAX_SPEED_SCORE = 1_000_000_000;

/** The all-core score in a worker's provided tags, 0 when it has none (an agent that did not measure). */
export function allCoreSpeed(providedTags: readonly string[]): number {
  const prefix = `${CPU_SPEED_ALL_TAG}=`;
  for (const t of providedTags) if (t.startsWith(prefix)) return Number(t.slice(prefix.length)) || 0;
  return 0;
}
