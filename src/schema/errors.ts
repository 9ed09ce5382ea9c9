import { builder } from '../builder.js';
import {
  AlreadyExistsError,
  AppError,
  ERROR_CODES,
  ForbiddenError,
  InputError,
  type InputProblem,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../errors.js';

const ErrorCode = builder.enumType('ErrorCode', { values: Object.values(ERROR_CODES) });

/** The interface every typed error implements. */
export const ErrorInterface = builder.interfaceRef<AppError>('Error').implement({
  description: 'A failure the client can fix; `code` is stable, `message` says what to change',
  fields: (t) => ({
    code: t.field({ type: ErrorCode, resolve: (e) => e.code }),
    message: t.exposeString('message'),
    path: t.string({
      nullable: true,
      description: 'The input field at fault, e.g. input.providedTags[2] or input.workspace; null when the error is not about one field',
      resolve: (e) => ('path' in e && typeof e.path === 'string' ? e.path : null),
    }),
  }),
});

const InputProblemRef = builder.objectRef<InputProblem>('InputProblem').implement({
  description: 'One problem of an input',
  fields: (t) => ({
    code: t.field({ type: ErrorCode, resolve: (p) => p.code }),
    message: t.exposeString('message'),
    path: t.exposeString('path', { nullable: true }),
    tag: t.exposeString('tag', { nullable: true }),
  }),
});

builder.objectType(InputError, {
  name: 'InputError',
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
  interfaces: [ErrorInterface],
  isTypeOf: (e) => e instanceof NotFoundError,
  fields: () => ({}),
});
for (const [cls, name] of [
  [AlreadyExistsError, 'AlreadyExistsError'],
  [ForbiddenError, 'ForbiddenError'],
  [UnauthenticatedError, 'UnauthenticatedError'],
  [InvalidStateError, 'InvalidStateError'],
] as const) {
  builder.objectType(cls, { name, interfaces: [ErrorInterface], isTypeOf: (e) => e instanceof cls, fields: () => ({}) });
}
