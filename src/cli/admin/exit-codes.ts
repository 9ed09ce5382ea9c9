/**
 * How tagsched-admin fails: one error class carrying the exit code, and the one table that maps the
 * server's stable error codes (a result union's `code`, or a GraphQL error's `extensions.code`) to
 * exit codes, so that scripts can tell "not found" from "forbidden" without parsing messages.
 */

/** The exit codes, documented in the README and in `tagsched-admin --help`. */
export const EXIT = {
  ok: 0,
  /** An unexpected error, an error of the server (masked), or a code this table does not know. */
  generic: 1,
  /** No token, a token the server refused (revoked, expired, unknown), or throttled attempts. */
  auth: 2,
  notFound: 3,
  /** The input was refused: a bad tag, bad task data, a limit, an unknown environment, … */
  invalidInput: 4,
  /** The token is valid but may not do this (not an admin, not a member). */
  forbidden: 5,
  /** The name is taken, or the object is not in a state that allows it. */
  conflict: 6,
  /** A bad command line: unknown command or flag, a missing argument, a value that cannot be used. */
  usage: 64,
  /** The server could not be reached, or what answered is not a tagsched GraphQL endpoint. */
  unreachable: 69,
  /** The config file cannot be used: unreadable, not JSON, or readable by other users. */
  config: 78,
} as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The server's error codes, by the exit code they give. */
const CODES_BY_EXIT: Record<Exclude<ExitCode, 0>, readonly string[]> = {
  [EXIT.generic]: ['INTERNAL_SERVER_ERROR'],
  [EXIT.auth]: ['UNAUTHENTICATED', 'RATE_LIMITED'],
  [EXIT.notFound]: ['NOT_FOUND'],
  [EXIT.invalidInput]: [
    'INVALID_INPUT',
    'INVALID_TAG',
    'TAG_NOT_ALLOWED',
    'TOO_MANY_TAGS',
    'TASK_DATA_TOO_LARGE',
    'UNKNOWN_TASK',
    'INVALID_TASK_DATA',
    'UNKNOWN_ENVIRONMENT',
    'UNKNOWN_IMAGE',
    'INVALID_RULE',
    'UNKNOWN_DEPENDENCY',
    'DEPENDENCY_CYCLE',
    'IDEMPOTENCY_KEY_REUSED',
    'LIMIT_EXCEEDED',
    'BAD_USER_INPUT',
  ],
  [EXIT.forbidden]: ['FORBIDDEN'],
  [EXIT.conflict]: ['ALREADY_EXISTS', 'INVALID_STATE'],
  [EXIT.usage]: [],
  [EXIT.unreachable]: [],
  [EXIT.config]: [],
};

const EXIT_BY_CODE = new Map<string, ExitCode>(
  Object.entries(CODES_BY_EXIT).flatMap(([exit, codes]) =>
    codes.map((code) => [code, Number(exit) as ExitCode] as const),
  ),
);

/** The exit code of a server error code; codes this table does not know (newer servers) give 1. */
export function exitCodeOf(code: string | null | undefined): ExitCode {
  return (code && EXIT_BY_CODE.get(code)) || EXIT.generic;
}

/** The table for --help and the README: exit code, meaning, server codes. */
export function exitCodeTable(): [number, string][] {
  const meaning: Record<Exclude<ExitCode, 0>, string> = {
    [EXIT.generic]: 'unexpected error, or a server error',
    [EXIT.auth]: 'no token, or the token was refused',
    [EXIT.notFound]: 'not found',
    [EXIT.invalidInput]: 'invalid input',
    [EXIT.forbidden]: 'forbidden',
    [EXIT.conflict]: 'conflict: already exists, or not in a state that allows it',
    [EXIT.usage]: 'bad command line',
    [EXIT.unreachable]: 'server unreachable',
    [EXIT.config]: 'config file unusable',
  };
  return Object.entries(meaning).map(([exit, text]) => [Number(exit), text]);
}

/** A failure tagsched-admin reports as one message on stderr (and detail lines), with its exit code. */
export class AdminError extends Error {
  override readonly name = 'AdminError';
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    /** The server's error code, when the server gave one. */
    readonly code: string | null = null,
    /** Further lines: every problem of an input, a hint. */
    readonly details: readonly string[] = [],
  ) {
    super(message);
  }
}

/** A command line that cannot be used (exit 64). */
export function usageError(message: string): AdminError {
  return new AdminError(message, EXIT.usage);
}
