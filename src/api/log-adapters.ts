/**
 * The libraries' loggers, fed into the service's JSON log: MikroORM's statements and the query
 * builder's warnings, and yoga's own lines. Values go through the same serializer as ours (no SQL
 * parameters, capped text).
 */
import type { Options } from '@mikro-orm/postgresql';
import { capText, serializeError, type Logger } from '../core/log.js';

/** A value yoga logs, as a log line may carry it. */
const loggable = (value: unknown) =>
  value instanceof Error
    ? serializeError(value)
    : capText(typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value)));

/** MikroORM's logging options: at debug level every statement, and the query builder's warnings. */
export function ormLogging(log: Logger): Pick<Partial<Options>, 'debug' | 'logger' | 'driverOptions'> {
  return {
    // At debug level every SQL statement is logged (without its parameters, which may hold secrets),
    // so that an operator, or a test counting the statements of an operation, sees them all.
    debug: log.isLevelEnabled('debug') ? ['query'] : false,
    logger: (message: string) => log.debug({ orm: true }, message),
    // The query builder's own warnings ("Connection Error: …" when PostgreSQL drops a pooled
    // connection) go to the JSON log instead of bare lines on the console.
    driverOptions: {
      log: {
        warn: (message: unknown) => log.warn({ knex: true }, capText(message)),
        error: (message: unknown) => log.error({ knex: true }, capText(message)),
        deprecate: (method: unknown, alternative: unknown) =>
          log.debug({ knex: true, method, alternative }, 'deprecated'),
        debug: (message: unknown) =>
          log.debug({ knex: true }, capText(typeof message === 'string' ? message : JSON.stringify(message))),
      },
    },
  };
}

/**
 * Yoga's logging: a bug was already logged at error by the error masking, so yoga's echo of it, like
 * its notes on requests it could not parse (client mistakes), stays at warn.
 */
export function yogaLogging(log: Logger) {
  return {
    debug: (...args: unknown[]) => log.debug({ args: args.map(loggable) }, 'yoga'),
    info: (...args: unknown[]) => log.info({ args: args.map(loggable) }, 'yoga'),
    warn: (...args: unknown[]) => log.warn({ args: args.map(loggable) }, 'yoga'),
    error: (...args: unknown[]) => log.warn({ args: args.map(loggable) }, 'yoga'),
  };
}
