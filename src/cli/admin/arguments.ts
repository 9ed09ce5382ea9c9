/**
 * Reading command-line values that commander leaves as strings: repeated flags, integers, instants
 * and lifetimes, JSON given inline or from a file, and secrets from stdin. A value that cannot be
 * used is a usage error (exit 64) that names the flag.
 */
import fs from 'node:fs';
import { usageError } from './exit-codes.js';

/** For repeatable flags: `--provide a --provide b` → ['a', 'b']. */
export const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

/** Parses an integer flag within bounds. */
export function integer(flag: string, raw: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^-?\d+$/.test(raw.trim())) throw usageError(`${flag} must be a whole number, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw usageError(`${flag} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** Parses a number flag (decimals allowed), at least `min`. */
export function decimal(flag: string, raw: string, min = 0): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n < min)
    throw usageError(`${flag} must be a number of at least ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** Parses a lifetime such as `90d`, `12h`, `30m`, `3600s` or `2w` into seconds. */
export function lifetimeSeconds(flag: string, raw: string): number {
  const m = /^(\d+)([smhdw])$/.exec(raw.trim());
  if (!m || Number(m[1]) <= 0)
    throw usageError(
      `${flag} must be a positive count with a unit (s, m, h, d, w), e.g. 90d; got ${JSON.stringify(raw)}`,
    );
  return Number(m[1]) * UNITS[m[2]];
}

/** Parses an instant (ISO 8601 with a time zone, or a date, taken as midnight UTC). */
export function instantArg(flag: string, raw: string): string {
  const text = /^\d{4}-\d{2}-\d{2}$/.test(raw.trim()) ? `${raw.trim()}T00:00:00Z` : raw.trim();
  const hasZone = /(Z|[+-]\d{2}:?\d{2})$/i.test(text);
  const t = Date.parse(text);
  if (!hasZone || Number.isNaN(t))
    throw usageError(
      `${flag} must be a date (2027-01-01) or an ISO 8601 instant with a time zone (2027-01-01T12:00:00Z), got ${JSON.stringify(raw)}`,
    );
  return new Date(t).toISOString();
}

/** The expiry of `--expires INSTANT` or `--expires-in LIFETIME` (at most one), or undefined. */
export function expiryOf(opts: { expires?: string; expiresIn?: string }, now = Date.now()): string | undefined {
  if (opts.expires && opts.expiresIn) throw usageError('give --expires or --expires-in, not both');
  if (opts.expires) return instantArg('--expires', opts.expires);
  if (opts.expiresIn) return new Date(now + lifetimeSeconds('--expires-in', opts.expiresIn) * 1000).toISOString();
  return undefined;
}

/** Reads a JSON value from text: inline JSON, `@FILE`, or `-` for stdin. */
export async function jsonArg(flag: string, raw: string, stdin: NodeJS.ReadableStream): Promise<unknown> {
  let text: string;
  let from = 'the value';
  if (raw === '-') {
    text = await readAll(stdin);
    from = 'stdin';
  } else if (raw.startsWith('@')) {
    from = raw.slice(1);
    try {
      text = fs.readFileSync(from, 'utf8');
    } catch (err) {
      throw usageError(`${flag}: cannot read ${from}: ${(err as Error).message}`);
    }
  } else {
    text = raw;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw usageError(`${flag}: ${from} is not JSON (${(err as Error).message})`);
  }
}

/** Reads a JSON object from a file (`-` for stdin). */
export async function jsonObjectFile(
  flag: string,
  file: string,
  stdin: NodeJS.ReadableStream,
): Promise<Record<string, unknown>> {
  const value = await jsonArg(flag, file === '-' ? '-' : `@${file}`, stdin);
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw usageError(`${flag}: ${file} must hold a JSON object`);
  return value as Record<string, unknown>;
}

/** Everything on a stream, as text. */
export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks).toString('utf8');
}

/** Splits comma-separated lists given to one flag into items. */
export function items(values: readonly string[] | undefined): string[] {
  return (values ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
}

/** An uppercase enum value from a flag, checked against the allowed ones. */
export function enumArg<T extends string>(flag: string, raw: string, allowed: readonly T[]): T {
  const value = raw.trim().toUpperCase().replace(/-/g, '_') as T;
  if (!allowed.includes(value))
    throw usageError(`${flag} must be one of ${allowed.join(', ')} (any case), got ${JSON.stringify(raw)}`);
  return value;
}
