/**
 * A small seeded random source (mulberry32) and the draws the workload needs, so that a seed always
 * gives the same farm and the same queue, on every machine.
 */

/** A seeded random source with the few draws the workload generator uses. */
export class Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1): mulberry32. */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element, uniformly. */
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }
}

/** Draws indexes in proportion to fixed weights, by binary search over the cumulative sums. */
export class WeightedIndex {
  private readonly cumulative: Float64Array;

  constructor(weights: readonly number[]) {
    this.cumulative = new Float64Array(weights.length);
    let sum = 0;
    weights.forEach((w, i) => {
      sum += w;
      this.cumulative[i] = sum;
    });
  }

  /** An index in [0, weights.length), with probability weight / total. */
  draw(random: Random): number {
    const c = this.cumulative;
    const target = random.next() * c[c.length - 1];
    let lo = 0;
    let hi = c.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (c[mid] > target) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

/** Weights of a Zipf-like popularity over n items (rank 0 the most popular). */
export function zipfWeights(n: number, exponent: number): number[] {
  return Array.from({ length: n }, (_, i) => 1 / (i + 1) ** exponent);
}

/** A weighted choice among named options: `[['amd64', 45], ['arm64', 15]]`. */
export class WeightedChoice<T> {
  private readonly index: WeightedIndex;
  private readonly values: readonly T[];

  constructor(options: readonly (readonly [T, number])[]) {
    this.values = options.map(([v]) => v);
    this.index = new WeightedIndex(options.map(([, w]) => w));
  }

  draw(random: Random): T {
    return this.values[this.index.draw(random)];
  }
}
