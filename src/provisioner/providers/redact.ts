/**
 * The provider account must not reach a log line, an error message or an answer (docs/design.md: pools and instances). What
 * a cloud or a command says back is not ours to trust, so every text a provider surfaces (an API's
 * error message, a command's stderr) goes through the redactor of the call's account first.
 */

/** Account strings shorter than this are not looked for: a two-letter value would blank common words. */
export const MIN_REDACTED_LENGTH = 6;

export const REDACTED = '[redacted]';

function stringsOf(value: unknown, out: Set<string>, depth = 0): void {
  if (depth > 10) return;
  if (typeof value === 'string') {
    if (value.length >= MIN_REDACTED_LENGTH) {
      out.add(value);
      // The same value as it appears inside a JSON document (a command echoing its request).
      out.add(JSON.stringify(value).slice(1, -1));
    }
  } else if (Array.isArray(value)) {
    for (const item of value) stringsOf(item, out, depth + 1);
  } else if (value && typeof value === 'object') {
    for (const item of Object.values(value)) stringsOf(item, out, depth + 1);
  }
}

/** Finds and blanks the account's secrets in a text. */
export interface Redactor {
  (text: string): string;
  /** Whether a text carries one of the account's secrets. */
  readonly finds: (text: string) => boolean;
}

/**
 * A redactor for the string values of `account` (only the fields named in `fields`, when given:
 * a region is no secret, and blanking it would make messages harder to read) and for `also`
 * (an activation token on its way to a new machine).
 */
export function accountRedactor(account: Readonly<Record<string, unknown>> | null, options: { fields?: readonly string[]; also?: readonly string[] } = {}): Redactor {
  const secrets = new Set<string>();
  if (account) {
    for (const [key, value] of Object.entries(account)) if (!options.fields || options.fields.includes(key)) stringsOf(value, secrets);
  }
  stringsOf(options.also ?? [], secrets);
  // Longest first, so that a secret containing another is blanked whole.
  const ordered = [...secrets].sort((a, b) => b.length - a.length);
  const redact = ((text: string) => ordered.reduce((out, secret) => out.split(secret).join(REDACTED), text)) as Redactor;
  Object.defineProperty(redact, 'finds', { value: (text: string) => ordered.some((secret) => text.includes(secret)) });
  return redact;
}
