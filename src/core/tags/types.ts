/**
 * The shared vocabulary of the tag engine: provenances, the four tag sets, entries and refusals.
 * Pure types and constants; every other module of `core/tags/` and `core/tasks/` speaks in these.
 */

/** Who contributed a tag to a set (docs/design.md: tags and provenance). */
export const PROVENANCES = ['worker', 'admin', 'system', 'user', 'workspace'] as const;
export type Provenance = (typeof PROVENANCES)[number];

/** The four tag sets of docs/design.md: tags and provenance. */
export const TAG_SET_KINDS = ['worker-provided', 'worker-required', 'task-provided', 'task-required'] as const;
export type TagSetKind = (typeof TAG_SET_KINDS)[number];

/** Which side of a match a tag sits on: provided tags may carry `=N`, required tags `>=N`. */
export type TagSide = 'provided' | 'required';

/** One contribution of a tag to a set: what, by whom, and from where (`pool:NAME`, `dynamic-metadata`, ...). */
export interface TagEntry {
  readonly tag: string;
  readonly provenance: Provenance;
  readonly source: string;
}

/** Stable codes for every reason a tag is refused; reasons are data, not prose (STYLE habit 3). */
export const REFUSAL_CODES = {
  /** The tag does not follow the syntax of docs/design.md: tags and provenance. */
  INVALID_SYNTAX: 'INVALID_SYNTAX',
  /** The set does not accept contributions of this provenance at all (e.g. a worker adding a required tag). */
  PROVENANCE_NOT_ALLOWED_FOR_SET: 'PROVENANCE_NOT_ALLOWED_FOR_SET',
  /** The tag's ontology does not accept this provenance (e.g. a worker claiming `worker:class:trusted`). */
  PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY: 'PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY',
  /** A user may provide a tag only under a prefix that the workspace grants to its members. */
  PREFIX_NOT_GRANTED_BY_WORKSPACE: 'PREFIX_NOT_GRANTED_BY_WORKSPACE',
  /** Another entry of higher trust already gives this valued tag a value. */
  VALUE_OVERRIDDEN: 'VALUE_OVERRIDDEN',
} as const;
export type RefusalCode = (typeof REFUSAL_CODES)[keyof typeof REFUSAL_CODES];

/** A tag that was not added to a set, with the rule that refused it. */
export interface TagRefusal {
  readonly tag: string;
  readonly provenance: Provenance;
  readonly source: string;
  readonly set: TagSetKind;
  readonly code: RefusalCode;
  /** One sentence naming the tag and the rule, fit to show to the person who can fix it. */
  readonly message: string;
}
