import { createLogger, type Logger } from '../../src/core/log.js';

/** The service's own logger (its serializers and redaction), writing into memory instead of stdout. */
export function captureLog(level = 'info') {
  const raw: string[] = [];
  const log: Logger = createLogger(level, { write: (s: string) => void raw.push(s) });
  return {
    log,
    /** Every line written so far, parsed. */
    lines: () => raw.map((s) => JSON.parse(s) as Record<string, unknown> & { level: number; msg: string }),
    /** Bytes written since `mark()` returned `from`. */
    bytesSince: (from: number) => raw.slice(from).reduce((n, s) => n + Buffer.byteLength(s), 0),
    textSince: (from: number) => raw.slice(from).join(''),
    mark: () => raw.length,
  };
}

/** pino's numeric levels. */
export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;
