/**
 * The reference match predicate of docs/design.md: tags and provenance: a work request runs on a worker iff each side
 * provides what the other requires. The scheduler decides in bulk elsewhere; this is the rule its
 * answers must agree with, and the one that names the missing tags in a diagnosis.
 *
 * A plain required tag is satisfied only by the identical string: `NAME` is not satisfied by a
 * provided `NAME=V` (a requirement that wants a value says `NAME>=0`), and a prefix never matches.
 * A required `NAME>=N` is satisfied by a provided `NAME=V` with V >= N.
 */
import { parseTag } from './syntax.js';

/** Provided tags indexed for the match rule: exact strings, plus the largest value of each valued name. */
export class ProvidedTagIndex {
  private readonly exact: ReadonlySet<string>;
  private maxima: Map<string, number> | null = null;

  /** Indexes a set of provided tags (read once, so a one-shot iterable is fine). */
  constructor(provided: Iterable<string>) {
    this.exact = provided instanceof Set ? (provided as ReadonlySet<string>) : new Set(provided);
  }

  /**
   * Whether one required tag is satisfied; the identical string always counts, which lets a tag
   * expression over a set that mixes provided and required tags test for a requirement too.
   */
  satisfies(required: string): boolean {
    if (this.exact.has(required)) return true;
    const parsed = parseTag(required, 'required');
    if (!parsed.ok || parsed.tag.kind !== 'minimum') return false;
    const max = this.valueMaxima().get(parsed.tag.name);
    return max !== undefined && max >= parsed.tag.minimum;
  }

  private valueMaxima(): Map<string, number> {
    if (this.maxima !== null) return this.maxima;
    const maxima = new Map<string, number>();
    for (const tag of this.exact) {
      const parsed = parseTag(tag, 'provided');
      if (!parsed.ok || parsed.tag.kind !== 'value') continue;
      const current = maxima.get(parsed.tag.name);
      if (current === undefined || parsed.tag.value > current) maxima.set(parsed.tag.name, parsed.tag.value);
    }
    this.maxima = maxima;
    return maxima;
  }
}

/** The required tags (as given, first occurrence order, without duplicates) that the provided tags do not satisfy. */
export function missingTags(required: readonly string[], provided: readonly string[]): string[] {
  if (required.length === 0) return [];
  const index = new ProvidedTagIndex(provided);
  const missing = new Set<string>();
  for (const tag of required) {
    if (!missing.has(tag) && !index.satisfies(tag)) missing.add(tag);
  }
  return [...missing];
}

/** The outcome of matching a work request with a worker, naming what is missing on each side. */
export interface MatchResult {
  readonly ok: boolean;
  /** Tags the task requires that the worker does not provide. */
  readonly missingOnWorker: string[];
  /** Tags the worker requires that the task does not provide. */
  readonly missingOnTask: string[];
}

/** Matches a work request's tag sets with a worker's, both ways. */
export function matchTags(
  task: { provided: readonly string[]; required: readonly string[] },
  worker: { provided: readonly string[]; required: readonly string[] },
): MatchResult {
  const missingOnWorker = missingTags(task.required, worker.provided);
  const missingOnTask = missingTags(worker.required, task.provided);
  return { ok: missingOnWorker.length === 0 && missingOnTask.length === 0, missingOnWorker, missingOnTask };
}
