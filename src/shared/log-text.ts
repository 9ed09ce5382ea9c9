/**
 * Pure helpers for job output text: what PostgreSQL can store, cuts at UTF-8 character boundaries,
 * the marker of dropped output, and the last lines that explain a failure.
 */

/**
 * What a NUL character in the handler's output is stored as (PostgreSQL text refuses NUL): U+2400
 * SYMBOL FOR NULL. The agent sends it so (the server refuses NUL in any input); pure, so the agent's
 * bundle may import it.
 */
export const NUL_REPLACEMENT = '\u2400';

/**
 * Text PostgreSQL and JSON can carry: NUL becomes ␀, and a lone UTF-16 surrogate (what a client's
 * JSON may hold, and what bytes that are not UTF-8 turn into nowhere else) becomes U+FFFD. The agent
 * already decodes bytes that are not UTF-8 as U+FFFD; the server does not rely on it.
 */
export function sanitizeLogText(text: string): string {
  // A round trip through UTF-8 turns lone surrogates into U+FFFD (what String#toWellFormed does).
  return Buffer.from(text, 'utf8').toString('utf8').replaceAll('\u0000', NUL_REPLACEMENT);
}

const isContinuation = (byte: number) => (byte & 0xc0) === 0x80;

/** The longest prefix of `buf` (valid UTF-8) of at most `max` bytes that ends on a character boundary. */
export function utf8PrefixLength(buf: Uint8Array, max: number): number {
  let n = Math.max(0, Math.min(max, buf.length));
  while (n > 0 && n < buf.length && isContinuation(buf[n])) n--;
  return n;
}

/** The first character boundary of `buf` (valid UTF-8) at or after `from`. */
export function utf8BoundaryAfter(buf: Uint8Array, from: number): number {
  let n = Math.max(0, Math.min(from, buf.length));
  while (n < buf.length && isContinuation(buf[n])) n++;
  return n;
}

/** The line shown where output was dropped to keep a log within TAGSCHED_MAX_LOG_BYTES. */
export function droppedMarker(bytes: number): string {
  return `\n[… ${bytes} bytes of output dropped here: the log keeps its first and last TAGSCHED_MAX_LOG_BYTES/2 …]\n`;
}

/** How the line that rerunMarker makes begins. */
export const RERUN_MARKER_START = '\n[… the work request runs again';

/** The line put in the log when a request runs again (a retry), before the new run's output. */
export function rerunMarker(): string {
  return `${RERUN_MARKER_START}; the output above is of the run before …]\n`;
}

/** How much of a log's end explains a failure: the last lines that are not blank, within a length. */
export const REASON_LIMITS = { lines: 5, chars: 1000 } as const;

/**
 * The last `lines` non-blank lines of `text`, trimmed at their ends, joined by newlines and cut to
 * the last `chars` characters (a cut line starts with "…"); null when there is none.
 */
export function lastLines(
  text: string,
  lines: number = REASON_LIMITS.lines,
  chars: number = REASON_LIMITS.chars,
): string | null {
  const kept = text
    .split(/\r?\n|\r/)
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== '')
    .slice(-lines);
  if (!kept.length) return null;
  const joined = kept.join('\n');
  const codePoints = Array.from(joined);
  return codePoints.length <= chars ? joined : `…${codePoints.slice(-(chars - 1)).join('')}`;
}

/** A reason given by a client (an agent), as it is stored: sanitized, trimmed, at most `chars` characters. */
export function cleanReason(reason: string, chars: number = REASON_LIMITS.chars): string | null {
  const text = sanitizeLogText(reason).trim();
  if (!text) return null;
  const codePoints = Array.from(text);
  return codePoints.length <= chars ? text : `${codePoints.slice(0, chars - 1).join('')}…`;
}
