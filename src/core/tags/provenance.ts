/**
 * Who may add which tag to which set (docs/design.md: tags and provenance). Three checks run in order, and the first
 * that says no gives the reason: the set's provenances, then (provided sets only) the tag's
 * ontology, then (users providing task tags) the prefixes the workspace grants its members.
 */
import { CUSTOM_ONTOLOGY, ontologyAllows, ontologyOf } from './ontology.js';
import type { Ontology } from './ontology.js';
import { quoteTag } from './syntax.js';
import type { ParsedTag } from './syntax.js';
import { REFUSAL_CODES } from './types.js';
import type { Provenance, RefusalCode, TagSetKind, TagSide } from './types.js';

/** The provenances allowed to add to each set, as in the table of docs/design.md: tags and provenance. */
export const SET_PROVENANCES: Readonly<Record<TagSetKind, readonly Provenance[]>> = {
  'worker-provided': ['worker', 'admin', 'system'],
  'worker-required': ['admin'],
  'task-provided': ['user', 'system', 'workspace'],
  'task-required': ['user', 'system', 'workspace'],
};

/** How far each provenance is trusted when two of them disagree on a value; higher wins. */
export const PROVENANCE_TRUST: Readonly<Record<Provenance, number>> = {
  system: 5,
  admin: 4,
  workspace: 3,
  user: 2,
  worker: 1,
};

/** Options of a set that change what a user may provide. */
export interface ContributionOptions {
  /** Tag-name prefixes the workspace lets its members provide; none when absent or empty. */
  readonly userProvidablePrefixes?: readonly string[];
}

/** Why a contribution is refused, in the shape {@link checkContribution} returns. */
export interface ContributionRefusal {
  code: RefusalCode;
  message: string;
}

/** Which side of a match a set is on, which decides between `=N` and `>=N` tags. */
export function sideOfSet(kind: TagSetKind): TagSide {
  return kind === 'worker-provided' || kind === 'task-provided' ? 'provided' : 'required';
}

function listWords(words: readonly string[]): string {
  if (words.length <= 1) return words.join('');
  return `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
}

function ontologyLabel(ontology: Ontology): string {
  return ontology === CUSTOM_ONTOLOGY ? 'custom tags' : `ontology "${ontology.prefix}"`;
}

/**
 * Says whether a provenance may add a (syntactically valid) tag to a set: null when allowed,
 * otherwise the refusal code and a message naming the tag, the provenance and the rule.
 */
export function checkContribution(
  set: TagSetKind,
  tag: ParsedTag,
  provenance: Provenance,
  opts?: ContributionOptions,
): ContributionRefusal | null {
  const quoted = quoteTag(tag.raw);
  const setAllows = SET_PROVENANCES[set];
  if (!setAllows.includes(provenance)) {
    return {
      code: REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_SET,
      message:
        `tag ${quoted} cannot be added to the ${set} set by ${provenance}: ` +
        `only ${listWords(setAllows)} may add to it`,
    };
  }

  const ontology = ontologyOf(tag.raw);
  // A reserved tag is a mistake on either side: requiring it would make a request that never runs.
  if (ontology.allowed !== 'all' && ontology.allowed.length === 0) {
    return {
      code: REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
      message: `tag ${quoted} is never valid, whoever adds it (here ${provenance}): ${ontology.description}`,
    };
  }
  // Adding a requirement only narrows the match, so required sets take any tag their provenances bring.
  if (sideOfSet(set) === 'required') return null;

  if (!ontologyAllows(ontology, provenance)) {
    const allowed = ontology.allowed === 'all' ? [] : ontology.allowed;
    const why = ontology === CUSTOM_ONTOLOGY && provenance === 'worker' ? '; a worker may not invent custom tags' : '';
    return {
      code: REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY,
      message:
        `tag ${quoted} may only be provided by ${listWords(allowed)}, not ${provenance} ` +
        `(${ontologyLabel(ontology)})${why}`,
    };
  }

  if (provenance === 'user' && set === 'task-provided') {
    // An empty prefix would grant every tag; a blank line in a workspace setting must not do that.
    const granted = (opts?.userProvidablePrefixes ?? []).filter((p) => p !== '');
    if (!granted.some((prefix) => tag.name.startsWith(prefix))) {
      const grants =
        granted.length === 0
          ? 'the workspace grants its members no tag prefixes'
          : `the workspace grants its members only ${listWords(granted.map((p) => JSON.stringify(p)))}`;
      return {
        code: REFUSAL_CODES.PREFIX_NOT_GRANTED_BY_WORKSPACE,
        message: `tag ${quoted} may not be provided by user: ${grants}`,
      };
    }
  }
  return null;
}
