import { getOperationAST, getVariableValues, GraphQLError, Kind, type ExecutionArgs } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { AppError, ERROR_CODES } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';

/**
 * Yoga's `maskError`: a client-fixable error thrown outside a result union (a query argument, a
 * cursor) keeps its message and code; anything else is a bug: logged in full, masked to the client.
 */
export function createErrorMasking(log: Logger): (error: unknown, message: string) => GraphQLError {
  return function maskError(error, message) {
    // Unwrap: graphql-js wraps what a resolver throws in a located GraphQLError (compare by name,
    // not instanceof: test runners may load two copies of graphql).
    let inner: unknown = error;
    while (inner instanceof Error && inner.name === 'GraphQLError' && (inner as GraphQLError).originalError)
      inner = (inner as GraphQLError).originalError;
    const located = error as GraphQLError;
    if (inner instanceof AppError) {
      return new GraphQLError(inner.message, {
        nodes: located.nodes,
        path: located.path,
        extensions: { code: inner.code },
      });
    }
    if (inner instanceof Error && inner.name === 'GraphQLError') return inner as GraphQLError; // meant for the client
    log.error({ err: inner }, 'unexpected error');
    return new GraphQLError(message, {
      nodes: located.nodes,
      path: located.path,
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
  };
}

/** As many problems of the variables as graphql-js reports before it gives up (its own execute's bound). */
const MAX_VARIABLE_ERRORS = 50;

/** A variable's problem as graphql-js words it, with code INVALID_INPUT and the variable's name. */
function variableError(error: GraphQLError): GraphQLError {
  const node = error.nodes?.[0];
  const variable = node?.kind === Kind.VARIABLE_DEFINITION ? node.variable.name.value : undefined;
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    extensions: {
      ...error.extensions,
      code: ERROR_CODES.INVALID_INPUT,
      ...(variable === undefined ? {} : { variable }),
    },
  });
}

/** Every problem of the operation's variables, coded (variableError); null when they fit. */
function variableErrors(args: ExecutionArgs): GraphQLError[] | null {
  const operation = getOperationAST(args.document, args.operationName);
  if (!operation?.variableDefinitions?.length) return null; // an unknown operation name: execute says so
  const { errors } = getVariableValues(args.schema, operation.variableDefinitions, args.variableValues ?? {}, {
    maxErrors: MAX_VARIABLE_ERRORS,
  });
  return errors?.length ? errors.map(variableError) : null;
}

/**
 * Variables that do not fit their operation are refused before anything else looks at them (the
 * cost limit, the resolvers), every problem an error with `extensions.code` INVALID_INPUT and
 * `extensions.variable` its variable; the message is graphql-js's and names the value's path in the
 * variable (`Variable "$i" got invalid value 1000000000000 at "i.maxLaunchesPerMinute"; Int cannot
 * represent non 32-bit signed integer value: …`): an Int over 2^31 − 1 or not whole, a string for a
 * number, an unknown enum value or input field, a required variable or field missing or null. The same
 * value written in the document is refused at validation (GRAPHQL_VALIDATION_FAILED). graphql-js's
 * own errors carry no code, and the cost limit, which coerces the variables too, would stop the
 * operation with the last of them before yoga's masking sees it: so this plugin is listed first, for
 * HTTP and WebSocket alike (app.ts).
 */
export function useVariableErrors(): Plugin {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const errors = variableErrors(args);
      if (errors) setResultAndStopExecution({ errors });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const errors = variableErrors(args);
      if (errors) setResultAndStopExecution({ errors });
    },
  };
}
