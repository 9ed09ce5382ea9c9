/**
 * The provider account must not reach a log line, an error message or an answer (docs/design.md: pools and instances). What
 * a cloud or a command says back is not ours to trust, so every text a provider surfaces (an API's
 * error message, a command's stderr) goes through the redactor of the call's account first, and is
 * cut only through it (`head`, `tail`): a secret cut in two is no longer found, so a text is blanked
 * whole before any cut, and a window that begins inside a secret drops that beginning.
 */

/** Account values whose text is shorter than this are not looked for: a two-letter value would blank common words. */
export const MIN_REDACTED_LENGTH = 6;

export const REDACTED = '[redacted]';

/**
 * The texts of an account's values, at any depth (objects, arrays): strings, and numbers as JSON
 * writes them (a command echoing its request); booleans and null are no secret. Keys are not
 * looked for (`token`, `region`: blanking them would make messages harder to read).
 */
function valueTexts(value: unknown, out: Set<string>): void {
  const stack: unknown[] = [value];
  while (stack.length) {
    const item = stack.pop();
    let text: string | null = null;
    if (typeof item === 'string') text = item;
    else if (typeof item === 'number' && Number.isFinite(item)) text = String(item);
    else if (Array.isArray(item)) stack.push(...(item as unknown[]));
    else if (item && typeof item === 'object') stack.push(...Object.values(item));
    if (text === null || text.length < MIN_REDACTED_LENGTH) continue;
    out.add(text);
    // The same value as it appears inside a JSON document (a multi-line key, quotes, backslashes).
    out.add(JSON.stringify(text).slice(1, -1));
  }
}

/** Finds and blanks the account's secrets in a text. */
export interface Redactor {
  (text: string): string;
  /** Whether a text carries one of the account's secrets. */
  readonly finds: (text: string) => boolean;
  /** The UTF-8 length of the longest secret: how far before a cut one may begin. */
  readonly reach: number;
  /** The text blanked, then cut to its first `maxChars` characters (`…` when it was cut). */
  readonly head: (text: string, maxChars: number) => string;
  /**
   * The last `maxBytes` bytes of `bytes` (UTF-8), blanked before the cut. `clipped` says that `bytes`
   * is itself the end of a longer output: its first `reach` characters, which may end a secret begun
   * before them, are dropped with any secret reaching into them (a window kept for this has `reach`
   * bytes more than it shows).
   */
  readonly tail: (bytes: Buffer, maxBytes: number, clipped: boolean) => string;
}

/** A cut at `at` that does not split a surrogate pair. */
function cutAt(text: string, at: number): number {
  const code = text.charCodeAt(at - 1);
  return at > 0 && code >= 0xd800 && code <= 0xdbff ? at - 1 : at;
}

/** Text decoded from bytes that may begin inside a character: the replacement characters of that start dropped. */
const decodeFrom = (bytes: Buffer) => bytes.toString('utf8').replace(/^\uFFFD+/, '');

/**
 * `text` with every occurrence of `secrets` replaced: the spans they cover are merged first, so that
 * two secrets that overlap are blanked together rather than the first breaking the second. `dropStart`
 * characters at the start are dropped, with any secret that reaches into them.
 */
function blank(text: string, secrets: readonly string[], dropStart = 0): string {
  const spans: [number, number][] = dropStart > 0 ? [[0, dropStart]] : [];
  for (const secret of secrets) {
    for (let at = text.indexOf(secret); at !== -1; at = text.indexOf(secret, at + 1))
      spans.push([at, at + secret.length]);
  }
  if (!spans.length) return text;
  spans.sort((a, b) => a[0] - b[0]);
  let out = '';
  let done = 0;
  let [from, to] = spans[0]!;
  const close = () => {
    out += text.slice(done, from) + (from === 0 && dropStart > 0 ? '' : REDACTED);
    done = to;
  };
  for (const [a, b] of spans.slice(1)) {
    if (a <= to) to = Math.max(to, b);
    else {
      close();
      [from, to] = [a, b];
    }
  }
  close();
  return out + text.slice(done);
}

/**
 * A redactor for the values of `account` (only the fields named in `fields`, when given: a region
 * is no secret, and blanking it would make messages harder to read) and for `also` (an activation
 * token on its way to a new machine).
 */
export function accountRedactor(
  account: Readonly<Record<string, unknown>> | null,
  options: { fields?: readonly string[]; also?: readonly string[] } = {},
): Redactor {
  const secrets = new Set<string>();
  if (account) {
    for (const [key, value] of Object.entries(account))
      if (!options.fields || options.fields.includes(key)) valueTexts(value, secrets);
  }
  valueTexts(options.also ?? [], secrets);
  const ordered = [...secrets];
  const reach = ordered.reduce((most, s) => Math.max(most, Buffer.byteLength(s)), 0);
  const redact = (text: string) => blank(text, ordered);
  const head = (text: string, maxChars: number) => {
    const out = redact(text);
    return out.length > maxChars ? `${out.slice(0, cutAt(out, maxChars))}…` : out;
  };
  const tail = (bytes: Buffer, maxBytes: number, clipped: boolean) => {
    // A secret begun before a clipped window has less than `reach` bytes in it, so fewer characters.
    const out = Buffer.from(
      clipped ? blank(decodeFrom(bytes), ordered, reach) : redact(bytes.toString('utf8')),
      'utf8',
    );
    return out.length > maxBytes ? decodeFrom(out.subarray(out.length - maxBytes)) : out.toString('utf8');
  };
  return Object.assign(redact, {
    finds: (text: string) => ordered.some((secret) => text.includes(secret)),
    reach,
    head,
    tail,
  });
}
