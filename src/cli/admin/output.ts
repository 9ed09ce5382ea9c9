/**
 * What tagsched-admin prints for people: aligned tables that fit the terminal (the widest
 * shrinkable columns are cut, with "…"), "label: value" blocks, and colour only on a terminal
 * without NO_COLOR. For scripts, `--json` prints the GraphQL data as it came.
 */
import cliTruncate from 'cli-truncate';
import picocolors from 'picocolors';
import stringWidth from 'string-width';

type Colors = ReturnType<typeof picocolors.createColors>;

/** Where a command's output goes, and how it may look. */
export interface Output {
  readonly json: boolean;
  readonly color: Colors;
  /** The terminal's width, or null when the output is not a terminal (nothing is cut then). */
  readonly width: number | null;
  /** Writes text as is. */
  write(text: string): void;
  /** Writes a line. */
  line(text?: string): void;
  /** Writes `value` as JSON (--json). */
  writeJson(value: unknown): void;
}

/** A stream-like sink: process.stdout, or a buffer in tests. */
export interface Sink {
  write(text: string): unknown;
}

/** The output for a sink: colour on a terminal without NO_COLOR (or --no-color), tables fit to `columns`. */
export function createOutput(
  sink: Sink,
  options: { json: boolean; isTTY: boolean; columns: number | undefined; noColor: boolean },
): Output {
  const color = picocolors.createColors(options.isTTY && !options.noColor);
  return {
    json: options.json,
    color,
    width: options.isTTY ? (options.columns ?? 80) : null,
    write: (text) => void sink.write(text),
    line: (text = '') => void sink.write(`${text}\n`),
    writeJson: (value) => void sink.write(`${JSON.stringify(value, null, 2)}\n`),
  };
}

/** One column of a table. */
export interface Column<R> {
  readonly header: string;
  readonly value: (row: R) => string | number | null | undefined;
  /** Numbers read better right-aligned. */
  readonly align?: 'left' | 'right';
  /** Whether the column may be cut to fit the terminal (names and ids should not be). */
  readonly shrink?: boolean;
  /** Colours a cell after it is cut to width. */
  readonly style?: (text: string, row: R) => string;
}

const GAP = 2;
const MIN_SHRUNK = 8;

/**
 * The widths of the columns: each its widest cell; when the row is wider than `width`, the widest
 * shrinkable column is cut down to the next widest, and so on (water-filling), never below its minimum.
 */
export function fitWidths(
  natural: readonly number[],
  shrinkable: readonly boolean[],
  minimums: readonly number[],
  width: number | null,
): number[] {
  const widths = [...natural];
  if (width === null) return widths;
  const total = () => widths.reduce((a, b) => a + b, 0) + GAP * (widths.length - 1);
  while (total() > width) {
    const candidates = widths.map((_w, i) => i).filter((i) => shrinkable[i] && widths[i] > minimums[i]);
    if (candidates.length === 0) break; // cannot fit: the terminal wraps the lines
    const widest = candidates.reduce((a, b) => (widths[b] > widths[a] ? b : a));
    const next = Math.max(minimums[widest], ...candidates.filter((i) => i !== widest).map((i) => widths[i]));
    const cut = Math.min(total() - width, Math.max(1, widths[widest] - next));
    widths[widest] -= Math.min(cut, widths[widest] - minimums[widest]);
  }
  return widths;
}

function cell(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === '') return '-';
  // One line per row: a newline or tab in a value would break the columns.
  return String(value).replace(/[\r\n\t]+/g, ' ');
}

/** Renders rows as an aligned table with a header line; "(none)" for no rows. */
export function renderTable<R>(out: Output, rows: readonly R[], columns: readonly Column<R>[]): string {
  if (rows.length === 0) return `${out.color.dim('(none)')}\n`;
  const cells = rows.map((row) => columns.map((c) => cell(c.value(row))));
  const natural = columns.map((c, i) => Math.max(stringWidth(c.header), ...cells.map((r) => stringWidth(r[i]))));
  const minimums = columns.map((c, i) => Math.min(natural[i], Math.max(stringWidth(c.header), MIN_SHRUNK)));
  const widths = fitWidths(
    natural,
    columns.map((c) => c.shrink === true),
    minimums,
    out.width,
  );
  const pad = (text: string, i: number, style?: (t: string) => string) => {
    const cut = stringWidth(text) > widths[i] ? cliTruncate(text, widths[i], { position: 'end' }) : text;
    const room = ' '.repeat(widths[i] - stringWidth(cut));
    const shown = style ? style(cut) : cut;
    if (columns[i].align === 'right') return room + shown;
    return i === columns.length - 1 ? shown : shown + room;
  };
  const lines = [columns.map((c, i) => pad(c.header, i, out.color.bold)).join(' '.repeat(GAP))];
  rows.forEach((row, r) =>
    lines.push(
      columns.map((c, i) => pad(cells[r][i], i, c.style ? (t) => c.style!(t, row) : undefined)).join(' '.repeat(GAP)),
    ),
  );
  return `${lines.map((l) => l.trimEnd()).join('\n')}\n`;
}

/**
 * Renders `label: value` lines with the values aligned; null values show as "-". A value of several
 * lines (a handler's reason) keeps its lines, each under the first, so the labels stay in their column.
 */
export function renderFields(
  out: Output,
  fields: readonly (readonly [string, string | number | boolean | null | undefined])[],
): string {
  const width = Math.max(...fields.map(([label]) => stringWidth(label))) + 1;
  const indent = `\n${' '.repeat(width + 1)}`;
  const shown = (value: string | number | boolean | null | undefined) =>
    value === null || value === undefined || String(value).trim() === ''
      ? '-'
      : String(value).replace(/\s+$/, '').replace(/\t/g, '  ').split('\n').join(indent);
  return fields.map(([label, value]) => `${out.color.bold(`${label}:`.padEnd(width + 1))}${shown(value)}\n`).join('');
}

/** A section heading. */
export function heading(out: Output, text: string): string {
  return `\n${out.color.bold(text)}\n`;
}

/** "12s ago", "5m ago", "3h ago", "2d ago"; "in 4d" for the future; "-" for null. */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return '-';
  const ms = now - Date.parse(iso);
  const s = Math.round(Math.abs(ms) / 1000);
  const text =
    s < 60
      ? `${s}s`
      : s < 3600
        ? `${Math.floor(s / 60)}m`
        : s < 86_400
          ? `${Math.floor(s / 3600)}h`
          : `${Math.floor(s / 86_400)}d`;
  return ms >= 0 ? `${text} ago` : `in ${text}`;
}

/** An instant as "2026-11-21 10:00:03Z" (UTC, to the second). */
export function instant(iso: string | null | undefined): string {
  if (!iso) return '-';
  return new Date(iso)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

/** A comma-separated list, or "-" when empty. */
export function list(values: readonly string[] | null | undefined): string {
  return values && values.length ? values.join(', ') : '-';
}

/** Colours a status (of a worker, work request, instance or diagnosis) for people; `text` defaults to the status. */
export function statusStyle(out: Output, status: string, text: string = status): string {
  const c = out.color;
  switch (status) {
    case 'IDLE':
    case 'COMPLETED':
    case 'SUCCESS':
    case 'RUNNING':
    case 'READY':
      return c.green(text);
    case 'BUSY':
    case 'ASSIGNED':
    case 'PENDING':
    case 'DRAINING':
    case 'LAUNCHING':
    case 'STOPPING':
    case 'WAITING_FOR_CAPACITY':
    case 'WAITING_FOR_WORKERS':
    case 'WAITING_FOR_PROVISIONING':
    case 'WAITING_FOR_POOL_LIMIT':
    case 'WAITING_FOR_BACKOFF':
    case 'STALE':
      return c.yellow(text);
    case 'DISCONNECTED':
    case 'QUARANTINED':
    case 'DISABLED':
    case 'ABORTED':
    case 'FAILURE':
    case 'ERROR':
    case 'FAILED':
    case 'UNSCHEDULABLE':
      return c.red(text);
    default:
      return c.dim(text);
  }
}

/**
 * Prints a token the server shows once (a new user's, a worker's, a rotated one): the value alone
 * on stdout, so that `… > file` keeps just it, and what it is on stderr.
 */
export function printSecretOnce(out: Output, stderr: Sink, what: string, value: string): void {
  stderr.write(`${what}; it is shown only this once, keep it now:\n`);
  out.line(value);
}
