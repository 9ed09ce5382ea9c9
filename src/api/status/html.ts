/**
 * HTML built by one tagged template, `html`, that escapes every value put into it: a value is text
 * unless it is already `Html` (built by `html` itself, or `raw` for a constant). Lists are joined;
 * null, undefined and false render as nothing. No page writes markup by string concatenation. Text
 * shows its control characters visibly (visibleControls), wherever it comes from.
 */

/** Markup that is safe to insert as it is. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

// C0 controls but tab and newline, DEL, and the C1 controls (U+009B is a one-character CSI).
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text with each control character (CONTROL_CHARACTERS) written as its escape, `\u001b` for ESC (as
 * JSON writes it): a page shows what a client sent rather than nothing, a box, or what a terminal the
 * text is copied to would do with it. A backslash the client sent stays as it is.
 */
export function visibleControls(text: string): string {
  return text.replace(CONTROL_CHARACTERS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

// A console's escape sequences: CSI (ESC [ or U+009B, parameters, a final byte: colours, cursor
// moves), OSC (ESC ] … BEL or ESC \: titles, hyperlinks), and any other two-character ESC sequence.
const CONSOLE_SEQUENCES =
  /(?:\u001b\[|\u009b)[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-_]/g;

/**
 * A console's output (a job's log, an instance's console) for a page: line ends as newlines, its
 * escape sequences (colours and the like) removed; any other control character left is then shown as
 * everywhere else (visibleControls).
 */
export function consoleText(text: string): string {
  return text.replace(/\r\n?/g, '\n').replace(CONSOLE_SEQUENCES, '');
}

/** Text made safe for an element's content or a quoted attribute value, its control characters visible. */
export function escapeHtml(text: string): string {
  return visibleControls(text).replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** The template tag: every interpolated value is escaped unless it is Html. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

/** A constant known to be markup (never client data). */
export const raw = (markup: string): Html => new Html(markup);

/** A path under /-/status/ with its query: each segment and value percent-encoded. */
export function href(
  segments: readonly (string | number)[],
  query: Record<string, string | number | null | undefined> = {},
): string {
  const path = `/-/status/${segments.map((s) => encodeURIComponent(String(s))).join('/')}${segments.length ? '/' : ''}`;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') params.set(k, String(v));
  const q = params.toString();
  return q ? `${path}?${q}` : path;
}
