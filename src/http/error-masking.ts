import { GraphQLError } from 'graphql';
import { AppError } from '../errors.js';
import type { Logger } from '../log.js';

/**
 * Yoga's `maskError`: a client-fixable error thrown outside a result union (a query argument, a
 * cursor) keeps its message and code; anything else is a bug: logged in full, masked to the client.
 */
export function createErrorMasking(log: Logger): (error: unknown, message: string) => GraphQLError {
  return function maskError(error, message) {
    // Unwrap: graphql-js wraps what a resolver throws in a located GraphQLError (compare by name,
    // not instanceof: test runners may load two copies of graphql).
    let inner: unknown = error;
    while (inner instanceof Error && inner.name === 'GraphQLError' && (inner as GraphQLError).originalError) inner = (inner as GraphQLError).originalError;
    const located = error as GraphQLError;
    if (inner instanceof AppError) {
      return new GraphQLError(inner.message, { nodes: located.nodes, path: located.path, extensions: { code: inner.code } });
    }
    if (inner instanceof Error && inner.name === 'GraphQLError') return inner as GraphQLError; // meant for the client
    log.error({ err: inner }, 'unexpected error');
    return new GraphQLError(message, { nodes: located.nodes, path: located.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } });
  };
}
