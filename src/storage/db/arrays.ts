/**
 * PostgreSQL array literals for query parameters. knex expands a JS array parameter into a list of
 * parameters, so arrays travel as one literal string cast in SQL (`?::int[]`, `?::text[]`).
 */

/** `{1,2,3}` for `?::int[]`. */
export function intArray(items: Iterable<number>): string {
  const out: string[] = [];
  for (const n of items) {
    if (!Number.isSafeInteger(n)) throw new Error(`not an integer: ${n}`);
    out.push(String(n));
  }
  return `{${out.join(',')}}`;
}

/** `{"a","b \"c\""}` for `?::text[]`: every element quoted, quotes and backslashes escaped. */
export function textArray(items: Iterable<string>): string {
  const out: string[] = [];
  for (const s of items) out.push(`"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"`);
  return `{${out.join(',')}}`;
}

/** `{"2026-12-03T15:00:00.000Z",NULL}` for `?::timestamptz[]`: each date in ISO form, null as NULL. */
export function timestampArray(dates: Iterable<Date | null>): string {
  const out: string[] = [];
  for (const d of dates) out.push(d ? `"${d.toISOString()}"` : 'NULL');
  return `{${out.join(',')}}`;
}

/** A timestamp from a raw row (the driver hands them to the ORM as strings) as a Date, or null. */
export function toDate(value: Date | string | null | undefined): Date | null {
  if (value == null) return null;
  return value instanceof Date ? value : new Date(value);
}
