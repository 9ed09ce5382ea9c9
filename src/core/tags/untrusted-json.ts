/**
 * Reading values parsed from untrusted JSON (worker metadata, pool specifications) without ever
 * throwing: no method of a value is called, so even objects without a prototype are safe.
 */

/** A JSON object, as far as its own keys go. */
export type JsonRecord = Readonly<Record<string, unknown>>;

/** Longest string shown back in a refusal; garbage must not be stored back at full size. */
const SHOWN_LENGTH = 100;

/** Whether a value is an object with keys (not null, not a list). */
export function isRecord(value: unknown): value is JsonRecord {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether a record says something under a key; null means "not said" too, since JSON cannot write undefined. */
export function hasValue(record: JsonRecord, key: string): boolean {
  return Object.hasOwn(record, key) && record[key] !== undefined && record[key] !== null;
}

/** A short text standing for a value in a refusal's `tag` field, for values that are not tags at all. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return value.length > SHOWN_LENGTH ? `${value.slice(0, SHOWN_LENGTH)}…` : value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return '(list)';
  return `(${typeof value})`;
}

/** The kind of a value, with its article, for messages such as "must be a number, got a string". */
export function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}
