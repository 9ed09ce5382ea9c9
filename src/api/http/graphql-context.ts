import type { MikroORM } from '@mikro-orm/postgresql';
import { GraphQLError } from 'graphql';
import { ClientRefusal, type ClientAuth } from '../client-auth.js';
import type { Context } from '../context.js';
import type { ContextFactory } from '../context-factory.js';

/**
 * The context of a GraphQL operation over HTTP: a forked EntityManager and the viewer of the
 * request's token; a refused client (bad token, too many failures) gets an UNAUTHENTICATED or
 * RATE_LIMITED error with its HTTP status.
 */
export function createHttpContext(orm: MikroORM, contexts: ContextFactory, authenticateClient: ClientAuth) {
  return async function httpContext(authorization: string | null, address: string): Promise<Context> {
    const em = orm.em.fork();
    try {
      return contexts.forOperation((await authenticateClient(em, authorization, address)).viewer, em);
    } catch (err) {
      if (err instanceof ClientRefusal) {
        throw new GraphQLError(err.message, {
          extensions: { code: err.status === 429 ? 'RATE_LIMITED' : 'UNAUTHENTICATED', http: { status: err.status } },
        });
      }
      throw err;
    }
  };
}
