/**
 * The deb822 control-file format (deb822(5)) that APT sources and dpkg's status file are written
 * in: paragraphs separated by blank lines, `Field: value` lines, continuation lines that start
 * with a space or a tab (` .` stands for an empty line), and `#` comment lines. Parsing never
 * throws: every problem is returned with its line number, and all of them at once.
 */

/** One field of a paragraph, with the line it starts on. */
export interface Deb822Field {
  /** As written; field names compare case-insensitively. */
  readonly name: string;
  /** The value: the first line's text, then each continuation line on a line of its own. */
  readonly value: string;
  readonly line: number;
}

/** One paragraph: its fields in order, and the line it starts on. */
export interface Deb822Paragraph {
  readonly fields: readonly Deb822Field[];
  readonly line: number;
}

/** Something in the text that is not deb822. */
export interface Deb822Problem {
  readonly line: number;
  readonly message: string;
}

/** The value of `name` (case-insensitive) in a paragraph, or undefined. */
export function fieldValue(paragraph: Deb822Paragraph, name: string): string | undefined {
  const lower = name.toLowerCase();
  return paragraph.fields.find((f) => f.name.toLowerCase() === lower)?.value;
}

// deb822(5): any printable US-ASCII but space and colon, not starting with # or -.
const FIELD_NAME = /^[!-9;-~]+$/;

/** Parses deb822 text into paragraphs, with every problem found (an empty list when it is well formed). */
export function parseDeb822(text: string): { paragraphs: Deb822Paragraph[]; problems: Deb822Problem[] } {
  const paragraphs: Deb822Paragraph[] = [];
  const problems: Deb822Problem[] = [];
  let fields: { name: string; lines: string[]; line: number }[] = [];
  let start = 0;

  const close = () => {
    if (fields.length === 0) return;
    const seen = new Set<string>();
    for (const f of fields) {
      const lower = f.name.toLowerCase();
      if (seen.has(lower)) problems.push({ line: f.line, message: `field ${f.name} appears twice in one paragraph` });
      seen.add(lower);
    }
    paragraphs.push({
      line: start,
      fields: fields.map((f) => ({ name: f.name, value: f.lines.join('\n'), line: f.line })),
    });
    fields = [];
  };

  const lines = text.replace(/\r\n/g, '\n').split('\n');
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw.includes('\0')) {
      problems.push({ line, message: 'contains a NUL character' });
      return;
    }
    if (raw.trim() === '') return close();
    if (raw.startsWith('#')) return;
    if (raw.startsWith(' ') || raw.startsWith('\t')) {
      const last = fields.at(-1);
      if (!last) {
        problems.push({ line, message: 'a continuation line (starting with a space) with no field before it' });
        return;
      }
      const content = raw.trim();
      last.lines.push(content === '.' ? '' : content);
      return;
    }
    const colon = raw.indexOf(':');
    if (colon <= 0) {
      problems.push({ line, message: `expected "Field: value", got "${raw.slice(0, 60)}"` });
      return;
    }
    const name = raw.slice(0, colon);
    if (!FIELD_NAME.test(name) || name.startsWith('-')) {
      problems.push({
        line,
        message: `"${name.slice(0, 60)}" is not a field name (printable characters, no space or colon)`,
      });
      return;
    }
    if (fields.length === 0) start = line;
    fields.push({ name, lines: [raw.slice(colon + 1).trim()], line });
  });
  close();
  return { paragraphs, problems };
}
