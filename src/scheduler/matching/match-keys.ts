import { tagName } from '../../core/tags/syntax.js';

/**
 * Requirements of a set of task classes (or requests), reduced to what tells workers apart for them:
 * the plain tags some of them require, and per valued name the minimums they ask for.
 */
export class MatchKeys {
  private readonly plain = new Set<string>();
  /** Per valued name (`worker:memory-gib`), the minimums asked for, ascending. */
  private readonly minima = new Map<string, number[]>();
  /**
   * What each provided tag adds to a key (null: nothing), decided once per tag: workers share most
   * of their tags, and keying 10,000 workers tag by tag was most of a candidates call.
   */
  private readonly part = new Map<string, string | null>();

  constructor(requiredTags: Iterable<string> = []) {
    this.add(requiredTags);
  }

  /** Takes more requirements into account; true when keys computed before may no longer be valid. */
  add(requiredTags: Iterable<string>): boolean {
    const changed = this.addAll(requiredTags);
    if (changed) this.part.clear();
    return changed;
  }

  private addAll(requiredTags: Iterable<string>): boolean {
    let changed = false;
    for (const tag of requiredTags) {
      const name = tagName(tag);
      if (!tag.startsWith('>=', name.length)) {
        if (!this.plain.has(tag)) {
          this.plain.add(tag);
          changed = true;
        }
        continue;
      }
      const minimum = Number(tag.slice(name.length + '>='.length));
      const list = this.minima.get(name) ?? [];
      if (list.includes(minimum)) continue;
      list.push(minimum);
      list.sort((a, b) => a - b);
      this.minima.set(name, list);
      changed = true;
    }
    return changed;
  }

  /**
   * A worker's (or pool template's) key: its type, its required tags, and of its provided tags only
   * those some requirement names, a valued one as the highest minimum it reaches. Workers with
   * equal keys match every one of these requirements the same way, so a match can be decided once
   * per key: workers report their exact disk, memory and cpu count, which would otherwise make
   * nearly every worker a group of its own.
   */
  keyOf(w: {
    readonly type: string;
    readonly providedTags: readonly string[];
    readonly requiredTags: readonly string[];
  }): string {
    const seen: string[] = [];
    for (const tag of w.providedTags) {
      let part = this.part.get(tag);
      if (part === undefined) this.part.set(tag, (part = this.partOf(tag)));
      if (part !== null) seen.push(part);
    }
    return `${w.type}\u0000${seen.sort().join(' ')}\u0000${[...w.requiredTags].sort().join(' ')}`;
  }

  /** What one provided tag adds to a key: itself when required, a valued one the highest minimum it reaches. */
  private partOf(tag: string): string | null {
    if (this.plain.has(tag)) return tag;
    const name = tagName(tag);
    // Only valued provided tags have a suffix, `=N` (docs/design.md: tags and provenance).
    const minima = tag.startsWith('=', name.length) ? this.minima.get(name) : undefined;
    if (!minima) return null;
    const value = Number(tag.slice(name.length + '='.length));
    let reached = -1;
    for (const m of minima) if (value >= m) reached = m;
    return `${name}>=${reached}`;
  }
}
