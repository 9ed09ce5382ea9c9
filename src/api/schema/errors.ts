import { builder } from '../builder.js';
import {
  AlreadyExistsError,
  AppError,
  ERROR_CODES,
  type ErrorCode,
  ForbiddenError,
  InputError,
  type InputProblem,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';

/** What each code means to a client; a code without a line here does not compile. */
const CODE_DESCRIPTIONS: Record<ErrorCode, string> = {
  INVALID_INPUT:
    'A value of the input is malformed or out of range (NUL, too long, not a name, not an id): `path` names it',
  INVALID_TAG: 'A tag is not written `prefix:name` or `prefix:name=value` with allowed characters: `tag` is the tag',
  TAG_NOT_ALLOWED:
    'The caller may not set this tag (a system or worker tag, or a prefix the workspace does not grant): `tag` is the tag',
  TOO_MANY_TAGS: 'A tag set holds more tags than TAGSCHED_MAX_TAGS allows',
  TASK_DATA_TOO_LARGE: 'taskData is over TAGSCHED_MAX_TASK_DATA_BYTES of JSON',
  LOG_CHUNK_TOO_LARGE: 'A chunk of job output is over the per-chunk limit: send it in parts',
  UNKNOWN_TASK: 'No task of this type and name is registered on the server',
  INVALID_TASK_DATA: "taskData does not fit the task's schema: `path` names the field",
  UNKNOWN_IMAGE: 'A pool names a worker image that is not registered (see the workerImages query)',
  UNKNOWN_ENVIRONMENT: 'taskData names an environment that is not registered (see the environments query)',
  INVALID_RULE: 'A task rule is malformed (its expression does not parse, it adds no tag) or its name is taken',
  UNKNOWN_DEPENDENCY: 'A dependency names a work request that does not exist, cannot be seen, or was aborted',
  DEPENDENCY_CYCLE: 'The dependencies would make a work request wait for itself',
  NOT_FOUND: 'Something the input names does not exist, or the caller may not see it (the two look the same)',
  ALREADY_EXISTS: 'The name is taken: choose another, or use the existing one',
  FORBIDDEN:
    'The token is valid but its owner may not do this (e.g. not an admin, not an owner of the workspace, a worker token where a user is needed)',
  UNAUTHENTICATED: 'The operation needs a bearer token and none was sent, or a one-shot token was already used',
  INVALID_STATE: 'The object is not in a state that allows this (e.g. completing work that is not running)',
  IDEMPOTENCY_KEY_REUSED: 'The idempotency key was used before for another operation or another input: use a new key',
};

const ErrorCode = builder.enumType('ErrorCode', {
  description: 'The stable code of a typed error: switch on it, not on the message',
  values: Object.fromEntries(
    Object.values(ERROR_CODES).map((c) => [c, { value: c, description: CODE_DESCRIPTIONS[c] }]),
  ) as Record<ErrorCode, { value: ErrorCode; description: string }>,
});

/** The interface every typed error implements. */
export const ErrorInterface = builder.interfaceRef<AppError>('Error').implement({
  description: 'A failure the client can fix; `code` is stable, `message` says what to change',
  fields: (t) => ({
    code: t.field({ type: ErrorCode, description: 'What went wrong, as a stable code', resolve: (e) => e.code }),
    message: t.exposeString('message', {
      description: 'What went wrong and what to change, in words for people (may change between releases)',
    }),
    path: t.string({
      nullable: true,
      description:
        'The input field at fault, e.g. input.providedTags[2] or input.workspace; null when the error is not about one field',
      resolve: (e) => ('path' in e && typeof e.path === 'string' ? e.path : null),
    }),
  }),
});

const InputProblemRef = builder.objectRef<InputProblem>('InputProblem').implement({
  description: 'One problem of an input',
  fields: (t) => ({
    code: t.field({ type: ErrorCode, description: 'What is wrong, as a stable code', resolve: (p) => p.code }),
    message: t.exposeString('message', { description: 'What is wrong and what to change' }),
    path: t.exposeString('path', {
      nullable: true,
      description: 'The input field at fault, e.g. input.taskData.host_architecture; null for the input as a whole',
    }),
    tag: t.exposeString('tag', {
      nullable: true,
      description: 'The tag at fault; null when the problem is not about a tag',
    }),
  }),
});

builder.objectType(InputError, {
  name: 'InputError',
  description:
    'The input is wrong: `path` names the field, `problems` lists every problem found, so that all can be fixed at once',
  interfaces: [ErrorInterface],
  isTypeOf: (e) => e instanceof InputError,
  fields: (t) => ({
    tag: t.exposeString('tag', { nullable: true, description: 'The tag at fault, when there is one' }),
    problems: t.field({
      type: [InputProblemRef],
      description: 'Every problem found, this error first (the others too, so that all can be fixed at once)',
      resolve: (e) => [...e.problems],
    }),
  }),
});
builder.objectType(NotFoundError, {
  name: 'NotFoundError',
  description:
    'Something the input names does not exist, or the caller may not see it (the two answer the same, so that names do not leak)',
  interfaces: [ErrorInterface],
  isTypeOf: (e) => e instanceof NotFoundError,
  fields: () => ({}),
});
for (const [cls, name, description] of [
  [
    AlreadyExistsError,
    'AlreadyExistsError',
    'The name is taken (a user, workspace, group, worker, pool or instance of that name exists)',
  ],
  [
    ForbiddenError,
    'ForbiddenError',
    "The caller's token is valid, but its owner may not do this: `message` says who may",
  ],
  [
    UnauthenticatedError,
    'UnauthenticatedError',
    'No bearer token was sent where one is needed, or a one-shot activation token was already used',
  ],
  [
    InvalidStateError,
    'InvalidStateError',
    'The object is not in a state that allows this (e.g. completing work that is not running): `message` gives its state',
  ],
] as const) {
  builder.objectType(cls, {
    name,
    description,
    interfaces: [ErrorInterface],
    isTypeOf: (e) => e instanceof cls,
    fields: () => ({}),
  });
}
