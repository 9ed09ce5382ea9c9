/**
 * The host's speed scores as the agent reports them and the server keeps them: the tags they become,
 * and their bound; placement reads the all-core one back from a worker's tags (scheduler/rules/placement-preference.ts).
 * The benchmark itself is the agent's (src/agent/speed.ts); the ontology (ontology.ts) lets every
 * provenance give these tags, as it does worker:cpu-count.
 */

/** The valued tag of the single-core score. */
export const CPU_SPEED_TAG = 'worker:cpu-speed';
/** The valued tag of the all-core score: what heavy work is placed by. */
export const CPU_SPEED_ALL_TAG = 'worker:cpu-speed-all';

/** The highest score the server takes (a figure above it is refused as input, never stored). */
export const MAX_SPEED_SCORE = 1_000_000_000;
