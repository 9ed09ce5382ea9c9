import pino, { type DestinationStream, type Logger } from 'pino';

/** The longest client string a log line carries; the rest is cut and its length said. */
export const LOG_TEXT_MAX_CHARS = 200;

/**
 * A client string (a name, a message quoting input, a URL) as a log line may carry it: at most
 * `max` characters, with the length of what was cut. Every client string written to a log goes
 * through here, so that a 5 MiB argument is never 5 MiB of log.
 */
export function capText(value: unknown, max = LOG_TEXT_MAX_CHARS): string {
  const text = typeof value === 'string' ? value : String(value);
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}

/**
 * Errors as logged. A driver error's message is the SQL with its parameters written in
 * (`insert into … values ('<5 MiB>', '<sealed account>') - value too long\n - detail: …`): only
 * PostgreSQL's (or the connection's) own words are kept, after the last " - " of the first part, and its `detail` and
 * `where` (which quote the row: "Key (name)=(…)", "JSON data, line 1: …") are dropped. A driver error
 * is one of the ORM's `…Exception`s, whether PostgreSQL answered (with its `routine`) or the connection
 * was lost during the statement ("Connection terminated unexpectedly", after SQL of one or many lines). Every message is capped, and the stack keeps its frames, not the message it starts with.
 */
export function serializeError(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: capText(err) };
  // graphql-js wraps what a resolver throws, copying its message: log what it wraps.
  const original = (err as { originalError?: unknown }).originalError;
  if (err.name === 'GraphQLError' && original instanceof Error)
    return { ...serializeError(original), graphqlPath: (err as { path?: unknown }).path };
  const e = err as Error & {
    code?: unknown;
    routine?: unknown;
    constraint?: unknown;
    table?: unknown;
    column?: unknown;
    cause?: unknown;
  };
  // MikroORM's DriverException (and its kinds) carries `sqlState`; PostgreSQL's errors carry `routine`.
  const driver = /Exception$/.test(e.name) && ('sqlState' in e || 'routine' in e);
  const head = driver ? e.message.split(/\n - (?:detail|hint): /)[0] : e.message;
  const cut = head.lastIndexOf(' - ');
  const message = driver && cut >= 0 ? head.slice(cut + 3) : head;
  const out: Record<string, unknown> = {
    type: e.name,
    message: capText(message, driver ? LOG_TEXT_MAX_CHARS : 2 * LOG_TEXT_MAX_CHARS),
  };
  if (typeof e.code === 'string' || typeof e.code === 'number') out.code = e.code;
  if (driver) {
    for (const key of ['routine', 'constraint', 'table', 'column'] as const)
      if (typeof e[key] === 'string') out[key] = e[key];
  }
  if (e.stack)
    out.stack = e.stack
      .split('\n')
      .filter((line) => /^\s+at /.test(line))
      .slice(0, 20)
      .join('\n');
  if (e.cause !== undefined && e.cause !== err) out.cause = serializeError(e.cause);
  return out;
}

/** JSON logs on stdout (or `destination`); anything that could carry a secret is redacted before it is written. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'tagsched' },
      serializers: { err: serializeError },
      redact: {
        paths: [
          'token',
          '*.token',
          'authorization',
          '*.authorization',
          'headers.authorization',
          'providerAccount',
          '*.providerAccount',
          'account',
          '*.account',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
export type { Logger };
