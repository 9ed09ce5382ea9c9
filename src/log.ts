import pino, { type Logger } from 'pino';

/** JSON logs on stdout; anything that could carry a secret is redacted before it is written. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'tagsched' },
    redact: {
      paths: ['token', '*.token', 'authorization', '*.authorization', 'headers.authorization', 'providerAccount', '*.providerAccount'],
      censor: '[redacted]',
    },
  });
}
export type { Logger };
