/**
 * HTML built by one tagged template, `html`, that escapes every value put into it: a value is text
 * unless it is already `Html` (built by `html` itself, or `raw` for a constant). Lists are joined;
 * null, undefined and false render as nothing. No page writes markup by string concatenation.
 */

/** Markup that is safe to insert as it is. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text made safe for an element's content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]);
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
export function href(segments: readonly (string | number)[], query: Record<string, string | number | null | undefined> = {}): string {
  const path = `/-/status/${segments.map((s) => encodeURIComponent(String(s))).join('/')}${segments.length ? '/' : ''}`;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') params.set(k, String(v));
  const q = params.toString();
  return q ? `${path}?${q}` : path;
}
