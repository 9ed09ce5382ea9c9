import type { Plugin } from 'graphql-yoga';
import { blockFieldSuggestionsPlugin } from '@escape.tech/graphql-armor-block-field-suggestions';
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesPlugin } from '@escape.tech/graphql-armor-max-directives';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import { GraphQLError, type DocumentNode, type ExecutionArgs } from 'graphql';
import type { Config } from '../../core/config/config.js';
import type { Logger } from '../../core/log.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { costError, countedFields, countLists, operationCost, type ListCounts } from './cost.js';
import type { ListSettings } from './list-bounds.js';

/** Names the setting of a refused operation in its error: `extensions.code` LIMIT_EXCEEDED and `extensions.limit`. */
function naming(setting: string, log: Logger) {
  return [
    (_ctx: unknown, err: GraphQLError) => {
      Object.assign(err.extensions, { code: 'LIMIT_EXCEEDED', limit: setting });
      log.info({ limit: setting, reason: err.message }, 'operation refused by a limit');
    },
  ];
}

/**
 * The bounds every operation meets before it runs (docs/design.md: limits and tokens), over HTTP and over WebSocket alike
 * (api/ws/server.ts runs the same envelop): GraphQL Armor's document limits (tokens while parsing, so a
 * document nested 5,000 deep is cut short before the parser recurses; then depth, aliases and
 * directives at validation), the estimated cost (cost.ts) before execution, and, as settings,
 * introspection and field suggestions.
 */
export function graphqlLimitPlugins(config: Pick<Config, 'limits' | 'api' | 'input'>, log: Logger): Plugin[] {
  const { limits } = config;
  const plugins: Plugin[] = [
    maxTokensPlugin({ n: limits.maxTokens, onReject: naming('TAGSCHED_MAX_TOKENS', log) }),
    // Introspection counts too: a query nesting __schema { types { fields { type { fields … is deep.
    maxDepthPlugin({
      n: limits.maxDepth,
      ignoreIntrospection: false,
      flattenFragments: true,
      onReject: naming('TAGSCHED_MAX_DEPTH', log),
    }),
    maxAliasesPlugin({ n: limits.maxAliases, onReject: naming('TAGSCHED_MAX_ALIASES', log) }),
    maxDirectivesPlugin({ n: limits.maxDirectives, onReject: naming('TAGSCHED_MAX_DIRECTIVES', log) }),
    useCostLimit(limits.maxCost, { maxBatchRequests: config.input.maxBatchRequests }, log),
  ];
  if (!config.api.introspection) plugins.push(useDisableIntrospection() as Plugin);
  if (!config.api.fieldSuggestions) plugins.push(blockFieldSuggestionsPlugin());
  return plugins;
}

/** Refuses, before anything runs, an operation whose estimated cost is over `max` (its lists counted first, cost.ts). */
function useCostLimit(max: number, settings: ListSettings, log: Logger): Plugin {
  const refuse = (cost: number): GraphQLError | null => {
    if (cost <= max) return null;
    log.info({ limit: 'TAGSCHED_MAX_COST', cost, max }, 'operation refused by a limit');
    return costError(cost, max);
  };
  // At the lists' maxima first, at once; only an operation over the limit has its lists counted (one
  // statement, with the operation's database session) and is estimated again. Without a session, or
  // when counting fails, the maxima stand.
  const check = (args: ExecutionArgs): GraphQLError | null | Promise<GraphQLError | null> => {
    const document = args.document as DocumentNode;
    const variables = args.variableValues as Record<string, unknown> | undefined;
    const estimate = (counts?: ListCounts): number | GraphQLError => {
      try {
        return operationCost(args.schema, document, variables, args.operationName, settings, counts);
      } catch (err) {
        if (err instanceof GraphQLError) return err; // variables that do not fit: graphql-js says so as well
        throw err;
      }
    };
    const atMaxima = estimate();
    if (atMaxima instanceof GraphQLError) return atMaxima;
    const em = (args.contextValue as { em?: EntityManager } | undefined)?.em;
    const keys = atMaxima > max && em ? countedFields(args.schema, document) : [];
    if (!keys.length) return refuse(atMaxima);
    return countLists(em!, keys).then(
      (counts) => {
        const counted = estimate(counts);
        return counted instanceof GraphQLError ? counted : refuse(counted);
      },
      () => refuse(atMaxima),
    );
  };
  const stopWhenRefused = (refused: GraphQLError | null, stop: (result: { errors: GraphQLError[] }) => void) => {
    if (refused) stop({ errors: [refused] });
  };
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const refused = check(args);
      if (refused instanceof Promise) return refused.then((r) => stopWhenRefused(r, setResultAndStopExecution));
      stopWhenRefused(refused, setResultAndStopExecution);
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const refused = check(args);
      if (refused instanceof Promise) return refused.then((r) => stopWhenRefused(r, setResultAndStopExecution));
      stopWhenRefused(refused, setResultAndStopExecution);
    },
  };
}
