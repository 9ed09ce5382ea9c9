/** A binary heap: `pop` gives the item that comes first by `before` (a strict order). */
export class Heap<T> {
  private readonly a: T[] = [];

  /** A heap of `items` (built in linear time). */
  constructor(
    private readonly before: (x: T, y: T) => boolean,
    items: readonly T[] = [],
  ) {
    this.a.push(...items);
    for (let i = (this.a.length >> 1) - 1; i >= 0; i--) this.down(i);
  }

  get size(): number {
    return this.a.length;
  }

  push(v: T): void {
    const a = this.a;
    a.push(v);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(a[i], a[p])) break;
      [a[p], a[i]] = [a[i], a[p]];
      i = p;
    }
  }

  /** The first item, removed; undefined when the heap is empty. */
  pop(): T | undefined {
    const a = this.a;
    if (!a.length) return undefined;
    const top = a[0];
    const last = a.pop()!;
    if (a.length) {
      a[0] = last;
      this.down(0);
    }
    return top;
  }

  /** Moves the item at `i` down to its place. */
  private down(i: number): void {
    const a = this.a;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && this.before(a[l], a[m])) m = l;
      if (r < a.length && this.before(a[r], a[m])) m = r;
      if (m === i) return;
      [a[m], a[i]] = [a[i], a[m]];
      i = m;
    }
  }
}
