/**
 * The syntax of one tag (docs/design.md: tags and provenance): a name of safe characters, optionally followed by a value
 * `=N` on the provided side or a minimum `>=N` on the required side. Matching is by exact,
 * case-sensitive string equality, so nothing here normalises a tag: it is accepted or refused.
 */
import type { TagSide } from './types.js';

/** The longest name a tag may have, not counting its `=N` or `>=N` suffix. */
export const MAX_TAG_LENGTH = 255;

/**
 * The longest number N of a valued tag, in characters: enough for any count, size or version, and
 * short enough that a tag always fits the database's indexes (a number of 200,000 digits did not).
 */
export const MAX_NUMBER_LENGTH = 32;

/** Stable names of the syntax rules, carried by {@link TagSyntaxError.rule}. */
export const TAG_SYNTAX_RULES = {
  EMPTY: 'empty',
  TOO_LONG: 'too-long',
  BAD_CHARACTERS: 'bad-characters',
  VALUE_ON_REQUIRED_SIDE: 'value-on-required-side',
  MINIMUM_ON_PROVIDED_SIDE: 'minimum-on-provided-side',
  BAD_NUMBER: 'bad-number',
  NUMBER_TOO_LONG: 'number-too-long',
} as const;
/** One of {@link TAG_SYNTAX_RULES}. */
export type TagSyntaxRule = (typeof TAG_SYNTAX_RULES)[keyof typeof TAG_SYNTAX_RULES];

/** A tag that follows the syntax: plain, valued (`NAME=N`, provided side) or a minimum (`NAME>=N`, required side). */
export type ParsedTag =
  | { readonly raw: string; readonly name: string; readonly kind: 'plain' }
  | { readonly raw: string; readonly name: string; readonly kind: 'value'; readonly value: number }
  | { readonly raw: string; readonly name: string; readonly kind: 'minimum'; readonly minimum: number };

/** Why a tag was refused: the tag as given, the rule it breaks, and a sentence naming both. */
export interface TagSyntaxError {
  readonly tag: string;
  readonly rule: TagSyntaxRule;
  readonly message: string;
}

/** The result of {@link parseTag}. */
export type ParseTagResult = { ok: true; tag: ParsedTag } | { ok: false; error: TagSyntaxError };

/**
 * One spelling per number (no leading zeros, no trailing fractional zeros), so that two equal
 * values are always the same string and set equality on tag strings stays meaningful. Written so
 * that JavaScript and PostgreSQL's regular expressions read it alike (valuedTagRegex), and without a
 * `?`, which the ORM would take for a parameter of the statement that holds it.
 */
const CANONICAL_NUMBER_SOURCE = '(0|[1-9][0-9]*)([.][0-9]*[1-9]){0,1}';
const CANONICAL_NUMBER = new RegExp(`^${CANONICAL_NUMBER_SOURCE}$`);

/**
 * A provided tag `NAME=N` of this name, as a regular expression (JavaScript's and PostgreSQL's) whose
 * first capturing group is N: what SQL uses to read a worker's value of a tag (`substring(t from …)`).
 */
export const valuedTagRegex = (name: string): string =>
  `^${name.replace(/[.+]/g, '\\$&')}=(${CANONICAL_NUMBER_SOURCE})$`;

/**
 * The name of a tag: the tag without its `=N` or `>=N` suffix, the whole tag when it has none (of a tag
 * that follows the syntax, the name parseTag reads). The one reading of a tag's name, in memory and,
 * as {@link tagNameSql}, in SQL.
 */
export function tagName(tag: string): string {
  const eq = tag.indexOf('=');
  if (eq < 0) return tag;
  return tag.slice(0, eq > 0 && tag[eq - 1] === '>' ? eq - 1 : eq);
}

/**
 * {@link tagName} as a SQL expression over the text expression `column`: what is left of it before
 * its first `=`, and before the `>` of a `>=`. Without a `?`, which the ORM would take for a parameter.
 */
export const tagNameSql = (column: string): string => `regexp_replace(${column}, '>{0,1}=.*', '')`;

/** The longest run of name characters at the start of a tag; whatever follows must be a suffix. */
const NAME_CHARS = /^[A-Za-z0-9:._+~-]*/;

/** Messages quote at most this much of a tag: a megabyte of garbage must not become a megabyte of log. */
const QUOTE_LIMIT = 80;

/** Quotes a tag for a message: JSON escapes make whitespace and control characters visible, and long tags are cut. */
export function quoteTag(raw: string): string {
  const shown = raw.length > QUOTE_LIMIT ? `${raw.slice(0, QUOTE_LIMIT)}…` : raw;
  return JSON.stringify(shown);
}

function fail(raw: string, rule: TagSyntaxRule, reason: string): { ok: false; error: TagSyntaxError } {
  return { ok: false, error: { tag: raw, rule, message: `tag ${quoteTag(raw)} is invalid: ${reason}` } };
}

/** Parses a tag for one side of a match, or says which rule it breaks. */
export function parseTag(raw: string, side: TagSide): ParseTagResult {
  if (raw.length === 0) return fail(raw, TAG_SYNTAX_RULES.EMPTY, 'a tag must not be empty');

  const end = NAME_CHARS.exec(raw)?.[0].length ?? 0;
  const name = raw.slice(0, end);
  const rest = raw.slice(end);
  const suffix = rest === '' ? null : rest.startsWith('>=') ? '>=' : rest.startsWith('=') ? '=' : undefined;
  if (suffix === undefined) {
    const found = String.fromCodePoint(raw.codePointAt(end) ?? 0);
    return fail(
      raw,
      TAG_SYNTAX_RULES.BAD_CHARACTERS,
      `only A-Z a-z 0-9 and : . _ + ~ - are allowed (no whitespace); found ${JSON.stringify(found)} at position ${end}`,
    );
  }
  if (name.length === 0) return fail(raw, TAG_SYNTAX_RULES.EMPTY, `a tag needs a name before "${suffix}"`);
  if (name.length > MAX_TAG_LENGTH) {
    return fail(
      raw,
      TAG_SYNTAX_RULES.TOO_LONG,
      `the name is ${name.length} characters long, at most ${MAX_TAG_LENGTH} are allowed`,
    );
  }
  if (suffix === null) return { ok: true, tag: { raw, name, kind: 'plain' } };

  if (suffix === '=' && side === 'required') {
    return fail(
      raw,
      TAG_SYNTAX_RULES.VALUE_ON_REQUIRED_SIDE,
      'a value "=N" is only allowed on provided tags; a required tag states a minimum ">=N"',
    );
  }
  if (suffix === '>=' && side === 'provided') {
    return fail(
      raw,
      TAG_SYNTAX_RULES.MINIMUM_ON_PROVIDED_SIDE,
      'a minimum ">=N" is only allowed on required tags; a provided tag states a value "=N"',
    );
  }
  const text = rest.slice(suffix.length);
  if (text.length > MAX_NUMBER_LENGTH) {
    return fail(
      raw,
      TAG_SYNTAX_RULES.NUMBER_TOO_LONG,
      `N in "${suffix}N" is ${text.length} characters long, at most ${MAX_NUMBER_LENGTH} characters are allowed`,
    );
  }
  const number = Number(text);
  if (!CANONICAL_NUMBER.test(text) || !Number.isFinite(number)) {
    return fail(
      raw,
      TAG_SYNTAX_RULES.BAD_NUMBER,
      `N in "${suffix}N" must be a non-negative decimal number such as 64, 0 or 2.5 ` +
        '(no sign, exponent, leading zeros or trailing fractional zeros)',
    );
  }
  return suffix === '='
    ? { ok: true, tag: { raw, name, kind: 'value', value: number } }
    : { ok: true, tag: { raw, name, kind: 'minimum', minimum: number } };
}

/** Checks a list of tags for one side and returns every syntax error, in the order of the list. */
export function validateTagList(tags: readonly string[], side: TagSide): TagSyntaxError[] {
  const errors: TagSyntaxError[] = [];
  for (const tag of tags) {
    const parsed = parseTag(tag, side);
    if (!parsed.ok) errors.push(parsed.error);
  }
  return errors;
}
