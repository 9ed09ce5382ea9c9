import { createLogger, type Logger } from '../../../src/core/log.js';

/** A real pino logger (the service's, with its redaction) whose lines a test can read. */
export function captureLog(): { logger: Logger; lines: string[]; text(): string } {
  const lines: string[] = [];
  const logger = createLogger('trace', { write: (line: string) => void lines.push(line) });
  return { logger, lines, text: () => lines.join('') };
}

/** A provider call for a pool, with a fresh signal. */
export function providerCall(
  account: Record<string, unknown> | null,
  timeoutMs = 10_000,
  pool: { name: string; specifications: Record<string, unknown> } = { name: 'test-pool', specifications: {} },
) {
  return { pool, account, signal: new AbortController().signal, timeoutMs };
}
