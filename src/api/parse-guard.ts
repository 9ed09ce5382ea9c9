import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/**
 * graphql-js parses recursively: a document nested some thousands of levels deep (a JSON literal
 * `{a: {a: …}}`, or selections) overflows the stack inside the parser. This envelop plugin turns that
 * overflow into a parse error for the client (400, GRAPHQL_PARSE_FAILED) instead of a masked 500;
 * the operation never runs, so nothing is written.
 */
export function useParseGuard(): Plugin {
  return {
    onParse({ parseFn, setParseFn }) {
      setParseFn((source, options) => {
        try {
          return parseFn(source, options);
        } catch (err) {
          if (!(err instanceof RangeError)) throw err;
          throw new GraphQLError('the document is nested too deeply to be parsed', {
            extensions: { code: 'GRAPHQL_PARSE_FAILED', http: { status: 400 } },
          });
        }
      });
    },
  };
}
