/**
 * What a status page reads from its request, checked before anything else runs: the query string
 * decoded strictly (malformed percent-encoding and NUL are refused), names, tags, statuses and page
 * numbers validated. A refusal is a StatusError, which the router renders as a 400 or 404 page.
 */
import { nameSchema } from '../../services/input/validate.js';
import { parseTag } from '../../core/tags/syntax.js';

/** A page that cannot be served, with the status and the sentence the visitor is shown. */
export class StatusError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 405 | 411 | 413 | 429,
    message: string,
  ) {
    super(message);
    this.name = 'StatusError';
  }
}

/** The highest page number a list accepts: beyond it a list is better filtered than paged. */
export const MAX_PAGE = 10_000;

/** Decodes a percent-encoded component (`+` as a space when `form`), or null when it is malformed. */
function decode(part: string, form: boolean): string | null {
  try {
    return decodeURIComponent(form ? part.replace(/\+/g, ' ') : part);
  } catch {
    return null;
  }
}

/** A path segment decoded; malformed encoding is a 400, a NUL a 404 (no name holds one). */
export function pathSegment(segment: string): string {
  const value = decode(segment, false);
  if (value === null) throw new StatusError(400, 'The address is not valid percent-encoding.');
  return value;
}

/** Parameters of a query string or a form body, decoded strictly (the first of repeated names wins). */
export function parseParams(text: string): Map<string, string> {
  const params = new Map<string, string>();
  for (const pair of text.split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const key = decode(eq < 0 ? pair : pair.slice(0, eq), true);
    const value = decode(eq < 0 ? '' : pair.slice(eq + 1), true);
    if (key === null || value === null) throw new StatusError(400, 'The query is not valid percent-encoding.');
    if (key.includes('\0') || value.includes('\0')) throw new StatusError(400, 'The query holds a NUL character.');
    if (!params.has(key)) params.set(key, value);
  }
  return params;
}

/** The page number (1 when absent); anything but a whole number from 1 to MAX_PAGE is a 400. */
export function pageNumber(params: Map<string, string>): number {
  const raw = params.get('page');
  if (raw === undefined || raw === '') return 1;
  if (!/^[0-9]{1,6}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_PAGE) {
    throw new StatusError(400, `The page number must be a whole number from 1 to ${MAX_PAGE}.`);
  }
  return Number(raw);
}

/** A whole number ≥ 0 below 2^53 (a byte offset), or the fallback when absent. */
export function wholeNumber(params: Map<string, string>, name: string, fallback: number | null): number | null {
  const raw = params.get(name);
  if (raw === undefined || raw === '') return fallback;
  if (!/^[0-9]{1,15}$/.test(raw)) throw new StatusError(400, `“${name}” must be a whole number.`);
  return Number(raw);
}

/**
 * A name of a pool or worker, or a refusal before any lookup: 400 for a query parameter, 404 for a
 * page's address (no pool or worker has such a name: NUL, slashes, …).
 */
export function nameParam(value: string, what: string, status: 400 | 404 = 400): string {
  if (!nameSchema.safeParse(value).success) {
    throw new StatusError(
      status,
      status === 404
        ? `There is no ${what} “${value.slice(0, 100)}”.`
        : `“${value.slice(0, 100)}” is not a valid ${what} name.`,
    );
  }
  return value;
}

/** A tag as workers provide it, or a 400 naming the syntax rule it breaks. */
export function tagParam(value: string): string {
  const parsed = parseTag(value, 'provided');
  if (!parsed.ok) throw new StatusError(400, parsed.error.message);
  return value;
}

/** One of the allowed values, or a 400 listing them. */
export function oneOfParam<const T extends string>(value: string, allowed: readonly T[], what: string): T {
  if (!(allowed as readonly string[]).includes(value))
    throw new StatusError(400, `The ${what} must be one of ${allowed.join(', ')}.`);
  return value as T;
}

/** An id of a row (a positive whole number), or a 404: no row has any other id. */
export function idSegment(value: string, what: string): number {
  if (!/^[0-9]{1,10}$/.test(value) || Number(value) < 1 || Number(value) > 2147483647)
    throw new StatusError(404, `There is no ${what} ${value.slice(0, 40)}.`);
  return Number(value);
}
