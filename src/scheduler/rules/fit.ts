/**
 * The fit of a task class to a worker (docs/design.md: tags and provenance), in its one home: each side provides what the
 * other requires, a required `NAME>=N` met by a provided `NAME=V` with V >= N (core/tags/match.ts, the pure
 * tag matcher, decides each tag). At class level a request's provided side is its significant tags
 * (storage/classes.ts). The TypeScript predicate (classFits, fitsOf for many classes) and what is
 * missing when it fails (classMismatch) are here, and so is its SQL prefilter (mayFitSql): the part of
 * the rule an index can answer, which lets through every fitting worker and, when neither side has a
 * minimum, only those. test/scheduler/rules/fit.test.ts checks that the two forms agree.
 */
import { textArray } from '../../storage/db/arrays.js';
import { matchTags, missingTags, ProvidedTagIndex } from '../../core/tags/match.js';

/** A task class as the scheduler decides it. */
export interface TaskClassRow {
  readonly id: number;
  readonly requiredTags: readonly string[];
  readonly significantProvidedTags: readonly string[];
}

/** What decides which classes a worker may take: its type and its two tag sets. */
export interface WorkerTags {
  readonly type: string;
  readonly providedTags: readonly string[];
  readonly requiredTags: readonly string[];
}

/** The worker type that never gets work, whatever it provides. */
export const NOT_ASSIGNABLE_TYPE = 'not-assignable';

/** The docs/design.md: tags and provenance rule at class level: the class's requirements ⊆ worker's provided, and the worker's requirements ⊆ the class's significant provided tags. */
export function classFits(c: TaskClassRow, w: WorkerTags): boolean {
  if (w.type === NOT_ASSIGNABLE_TYPE) return false;
  return matchTags(
    { provided: c.significantProvidedTags, required: c.requiredTags },
    { provided: w.providedTags, required: w.requiredTags },
  ).ok;
}

/**
 * The index of a set of provided tags, kept while the array lives: the worker snapshot hands out the
 * same array for a worker until its shape changes, so the bulk questions index each shape once, not
 * at every call (a candidates call over 10,000 workers matches a couple of hundred match keys).
 */
const indexes = new WeakMap<readonly string[], ProvidedTagIndex>();
/** The index of these provided tags, built once per array. */
export function providedIndexOf(providedTags: readonly string[]): ProvidedTagIndex {
  let index = indexes.get(providedTags);
  if (!index) indexes.set(providedTags, (index = new ProvidedTagIndex(providedTags)));
  return index;
}

/** {@link classFits} for one worker against many classes, its provided tags indexed once. */
export function fitsOf(w: WorkerTags): (c: TaskClassRow) => boolean {
  if (w.type === NOT_ASSIGNABLE_TYPE) return () => false;
  const index = providedIndexOf(w.providedTags);
  return (c) =>
    c.requiredTags.every((t) => index.satisfies(t)) &&
    missingTags(w.requiredTags, c.significantProvidedTags).length === 0;
}

/** What keeps a class from a worker or a pool: the class's requirements it does not provide, and its requirements the class does not provide. */
export interface Mismatch {
  readonly missingOnWorker: string[];
  readonly missingOnTask: string[];
}

/** As matchTags for a class and a worker (or pool template) whose provided tags are indexed: the unsatisfied requirements of each side, once each, in their order. */
export function classMismatch(
  c: TaskClassRow,
  w: { readonly index: ProvidedTagIndex; readonly requiredTags: readonly string[] },
): Mismatch {
  return {
    missingOnWorker: [...new Set(c.requiredTags)].filter((t) => !w.index.satisfies(t)),
    missingOnTask: missingTags(w.requiredTags, c.significantProvidedTags),
  };
}

const isMinimum = (tag: string) => tag.includes('>=');

/**
 * The prefilter of the rule, in TypeScript: every plain tag the class requires is among the worker's
 * provided tags, and the worker's requirements are among the class's significant provided tags unless
 * one of them is a minimum. Implied by {@link classFits}; equal to it when no tag on either side is a minimum.
 */
export function mayFit(c: TaskClassRow, w: WorkerTags): boolean {
  const provided = new Set(w.providedTags);
  const significant = new Set(c.significantProvidedTags);
  return (
    c.requiredTags.filter((t) => !isMinimum(t)).every((t) => provided.has(t)) &&
    (w.requiredTags.every((t) => significant.has(t)) || w.requiredTags.some(isMinimum))
  );
}

/**
 * {@link mayFit} as a SQL condition on the worker table under `alias` (its tag arrays, through their
 * GIN indexes): two parameters, mayFitParams(class), in its place.
 */
export const mayFitSql = (alias: string) =>
  `(${alias}.provided_tags @> ?::text[]
    and (${alias}.required_tags <@ ?::text[] or exists (select 1 from unnest(${alias}.required_tags) t where strpos(t, '>=') > 0)))`;

/** The parameters of mayFitSql for a class: its plain requirements and its significant provided tags. */
export const mayFitParams = (c: TaskClassRow): unknown[] => [
  textArray(c.requiredTags.filter((t) => !isMinimum(t))),
  textArray(c.significantProvidedTags),
];
