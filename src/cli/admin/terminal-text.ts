/**
 * What tagsched-admin prints for people must not drive the terminal: text that workers, handlers or
 * other users wrote (a status reason, a rejected tag's reason, a provider's error) may carry escape
 * sequences that recolour, hide or retitle. These remove them before anything is laid out.
 */

// CSI (ESC [ … final), OSC (ESC ] … BEL or ESC \), and any other two-character ESC sequence.
const ESCAPE_SEQUENCES = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)?|\u001b[@-_]?/g;
// C0 controls but tab and newline, DEL, and the C1 controls (U+009B is a one-character CSI).
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** `text` without escape sequences and control characters; tabs and newlines are kept (carriage returns become newlines). */
export function terminalSafe(text: string): string {
  return text.replace(/\r\n?/g, '\n').replace(ESCAPE_SEQUENCES, '').replace(CONTROLS, '');
}

/** A copy of GraphQL data with every string made terminalSafe. */
export function terminalSafeDeep<T>(value: T): T {
  if (typeof value === 'string') return terminalSafe(value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => terminalSafeDeep(v)) as T;
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, terminalSafeDeep(v)])) as T;
  return value;
}

// Select Graphic Rendition (colours, bold, …): ESC [ parameters m. Nothing else of a job's output reaches a terminal.
const SGR = /^\u001b\[[0-9;:]*m$/;

/**
 * A job's output for a terminal: like terminalSafe, but colour sequences (SGR) are kept, so that a
 * build's coloured output still reads as such; cursor movement, titles, hyperlinks and every other
 * control are removed.
 */
export function terminalSafeOutput(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(ESCAPE_SEQUENCES, (sequence) => (SGR.test(sequence) ? sequence : ''))
    .replace(/\u001b(?!\[[0-9;:]*m)/g, '')
    .replace(/[\u0000-\u0008\u000b-\u001a\u001c-\u001f\u007f-\u009f]/g, '');
}
