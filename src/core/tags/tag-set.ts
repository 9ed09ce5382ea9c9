/**
 * Builds one of the four tag sets from contributions, keeping every entry with its provenance and
 * source and every refusal with its reason, so that the result can be explained afterwards.
 */
import { PROVENANCE_TRUST, checkContribution, sideOfSet } from './provenance.js';
import type { ContributionOptions } from './provenance.js';
import { parseTag, quoteTag } from './syntax.js';
import { REFUSAL_CODES } from './types.js';
import type { Provenance, RefusalCode, TagEntry, TagRefusal, TagSetKind, TagSide } from './types.js';

/** Tells a refusal from an entry, as returned by {@link TagSetBuilder.add}. */
export function isRefusal(x: TagEntry | TagRefusal): x is TagRefusal {
  return 'code' in x;
}

/** A valued entry of a provided set, which may lose its place to a more trusted value. */
interface Valued {
  readonly name: string;
  readonly value: number;
}

type Item =
  | { readonly entry: TagEntry; readonly valued: Valued | null; readonly refusal?: undefined }
  | { readonly refusal: TagRefusal; readonly entry?: undefined };

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Accumulates contributions to one tag set, checking syntax and provenance on the way in. */
export class TagSetBuilder {
  /** The set being built. */
  readonly kind: TagSetKind;
  /** Which side of a match the set is on. */
  readonly side: TagSide;
  private readonly opts: ContributionOptions;
  private readonly items: Item[] = [];
  private readonly byTriple = new Map<string, Item>();
  /** Per valued name, the entry whose value the set keeps; recomputed lazily after each add. */
  private winnersCache: Map<string, { entry: TagEntry; valued: Valued }> | null = null;

  /** Starts an empty set of the given kind; `userProvidablePrefixes` matter only for task-provided sets. */
  constructor(kind: TagSetKind, opts?: { userProvidablePrefixes?: readonly string[] }) {
    this.kind = kind;
    this.side = sideOfSet(kind);
    this.opts = opts ?? {};
  }

  /** Adds one contribution and returns its entry, or the refusal that kept it out. */
  add(tag: string, provenance: Provenance, source: string): TagEntry | TagRefusal {
    const key = JSON.stringify([tag, provenance, source]);
    const known = this.byTriple.get(key);
    if (known !== undefined) return this.outcome(known);

    const item = this.decide(tag, provenance, source);
    this.items.push(item);
    this.byTriple.set(key, item);
    this.winnersCache = null;
    return this.outcome(item);
  }

  /** Adds several tags of the same provenance and source; refusals are kept, not returned. */
  addAll(tags: readonly string[], provenance: Provenance, source: string): void {
    for (const tag of tags) this.add(tag, provenance, source);
  }

  /** Records a refusal decided outside the set (e.g. metadata that is not even a string). */
  refuse(tag: string, provenance: Provenance, source: string, code: RefusalCode, message: string): TagRefusal {
    const refusal: TagRefusal = { tag, provenance, source, set: this.kind, code, message };
    this.items.push({ refusal });
    return refusal;
  }

  /** The accepted entries, in the order they were added. */
  entries(): TagEntry[] {
    const result: TagEntry[] = [];
    for (const item of this.items) {
      if (item.entry !== undefined && this.overriddenBy(item) === null) result.push(item.entry);
    }
    return result;
  }

  /** The refused contributions, in the order they were added, including values that lost to a more trusted one. */
  refusals(): TagRefusal[] {
    return this.items.flatMap((item) => {
      const outcome = this.outcome(item);
      return isRefusal(outcome) ? [outcome] : [];
    });
  }

  /** The distinct accepted tag strings, sorted by code point so that equal sets print equally. */
  tags(): string[] {
    return [...new Set(this.entries().map((e) => e.tag))].sort(compareText);
  }

  private decide(tag: string, provenance: Provenance, source: string): Item {
    const refuse = (code: RefusalCode, message: string): Item => ({
      refusal: { tag, provenance, source, set: this.kind, code, message },
    });
    const parsed = parseTag(tag, this.side);
    if (!parsed.ok) return refuse(REFUSAL_CODES.INVALID_SYNTAX, parsed.error.message);
    const refusal = checkContribution(this.kind, parsed.tag, provenance, this.opts);
    if (refusal !== null) return refuse(refusal.code, refusal.message);
    const valued = parsed.tag.kind === 'value' ? { name: parsed.tag.name, value: parsed.tag.value } : null;
    return { entry: { tag, provenance, source }, valued };
  }

  private outcome(item: Item): TagEntry | TagRefusal {
    if (item.refusal !== undefined) return item.refusal;
    const winner = this.overriddenBy(item);
    if (winner === null) return item.entry;
    const { tag, provenance, source } = item.entry;
    const rule =
      PROVENANCE_TRUST[winner.provenance] === PROVENANCE_TRUST[provenance]
        ? 'both are trusted alike and the first one added wins'
        : `${winner.provenance} is trusted more than ${provenance}`;
    return {
      tag,
      provenance,
      source,
      set: this.kind,
      code: REFUSAL_CODES.VALUE_OVERRIDDEN,
      message:
        `tag ${quoteTag(tag)} from ${provenance} (${source}) is overridden by ${quoteTag(winner.tag)} ` +
        `from ${winner.provenance} (${winner.source}): a valued tag has one value per set, and ${rule}`,
    };
  }

  /** The entry whose different value displaces this one, or null when this one stays. */
  private overriddenBy(item: Item): TagEntry | null {
    if (item.entry === undefined || item.valued === null) return null;
    const winner = this.winners().get(item.valued.name);
    if (winner === undefined || winner.valued.value === item.valued.value) return null;
    return winner.entry;
  }

  /**
   * The most trusted entry wins, the earliest among equals; entries that agree with its value
   * stay whatever their trust, since they only confirm it.
   */
  private winners(): Map<string, { entry: TagEntry; valued: Valued }> {
    if (this.winnersCache !== null) return this.winnersCache;
    const winners = new Map<string, { entry: TagEntry; valued: Valued }>();
    for (const item of this.items) {
      if (item.entry === undefined || item.valued === null) continue;
      const current = winners.get(item.valued.name);
      const trust = PROVENANCE_TRUST[item.entry.provenance];
      if (current === undefined || trust > PROVENANCE_TRUST[current.entry.provenance]) {
        winners.set(item.valued.name, { entry: item.entry, valued: item.valued });
      }
    }
    this.winnersCache = winners;
    return winners;
  }
}
