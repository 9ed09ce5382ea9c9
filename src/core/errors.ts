/**
 * Errors a client can fix, each with a stable `code`. Resolvers throw them; the Pothos errors plugin
 * turns them into members of the field's result union. Anything else is a bug: masked, logged in full.
 */

/** Stable codes clients can switch on. */
export const ERROR_CODES = {
  INVALID_INPUT: 'INVALID_INPUT',
  INVALID_TAG: 'INVALID_TAG',
  TAG_NOT_ALLOWED: 'TAG_NOT_ALLOWED',
  TOO_MANY_TAGS: 'TOO_MANY_TAGS',
  TASK_DATA_TOO_LARGE: 'TASK_DATA_TOO_LARGE',
  LOG_CHUNK_TOO_LARGE: 'LOG_CHUNK_TOO_LARGE',
  UNKNOWN_TASK: 'UNKNOWN_TASK',
  INVALID_TASK_DATA: 'INVALID_TASK_DATA',
  UNKNOWN_ENVIRONMENT: 'UNKNOWN_ENVIRONMENT',
  UNKNOWN_IMAGE: 'UNKNOWN_IMAGE',
  INVALID_RULE: 'INVALID_RULE',
  UNKNOWN_DEPENDENCY: 'UNKNOWN_DEPENDENCY',
  DEPENDENCY_CYCLE: 'DEPENDENCY_CYCLE',
  NOT_FOUND: 'NOT_FOUND',
  ALREADY_EXISTS: 'ALREADY_EXISTS',
  FORBIDDEN: 'FORBIDDEN',
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  INVALID_STATE: 'INVALID_STATE',
  IDEMPOTENCY_KEY_REUSED: 'IDEMPOTENCY_KEY_REUSED',
} as const;
export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/** Base of every client-fixable error. */
export abstract class AppError extends Error {
  abstract readonly code: ErrorCode;
}

/** The input is wrong; `path` names the field (e.g. `input.taskData.host_architecture`), `tag` the tag at fault. */
export class InputError extends AppError {
  /** Every problem found in the input, this one first: a client can fix them all in one go. */
  readonly problems: readonly InputProblem[];

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly path: string | null = null,
    readonly tag: string | null = null,
    more: readonly InputProblem[] = [],
  ) {
    super(message);
    this.name = 'InputError';
    this.problems = [{ code, message, path, tag }, ...more];
  }

  /** One error for several problems (at least one), the first of them its own code, message, path and tag. */
  static of(problems: readonly InputProblem[]): InputError {
    const [first, ...rest] = problems;
    if (!first) throw new Error('InputError.of needs at least one problem');
    return new InputError(first.code, first.message, first.path, first.tag, rest);
  }
}

/** One problem of an input. */
export interface InputProblem {
  readonly code: ErrorCode;
  readonly message: string;
  readonly path: string | null;
  readonly tag: string | null;
}

/** Something named in the input does not exist (or the viewer may not see it, which looks the same). */
export class NotFoundError extends AppError {
  readonly code = ERROR_CODES.NOT_FOUND;
  constructor(
    message: string,
    readonly path: string | null = null,
  ) {
    super(message);
    this.name = 'NotFoundError';
  }
}

/** The name is taken. */
export class AlreadyExistsError extends AppError {
  readonly code = ERROR_CODES.ALREADY_EXISTS;
  constructor(message: string) {
    super(message);
    this.name = 'AlreadyExistsError';
  }
}

/** The viewer is known but may not do this. */
export class ForbiddenError extends AppError {
  readonly code = ERROR_CODES.FORBIDDEN;
  constructor(message: string) {
    super(message);
    this.name = 'ForbiddenError';
  }
}

/** No token, where one is needed. (A wrong or disabled token is refused before any resolver runs.) */
export class UnauthenticatedError extends AppError {
  readonly code = ERROR_CODES.UNAUTHENTICATED;
  constructor(message = 'this operation needs a bearer token (Authorization: Bearer …)') {
    super(message);
    this.name = 'UnauthenticatedError';
  }
}

/** The object is not in a state that allows this (e.g. completing a request that is not running). */
export class InvalidStateError extends AppError {
  readonly code = ERROR_CODES.INVALID_STATE;
  constructor(message: string) {
    super(message);
    this.name = 'InvalidStateError';
  }
}
