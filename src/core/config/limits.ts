import { intVar } from './variables.js';

/** What one operation may ask for, and what a client may send (docs/design.md: limits and tokens); see `src/api/limits/` and docs/reference/limits.md. */
export interface LimitsConfig {
  /** Deepest selection set of an operation. */
  readonly maxDepth: number;
  /** Most aliases in one operation. */
  readonly maxAliases: number;
  /** Most lexical tokens in one document (counted while it is parsed, so a huge one is cut short). */
  readonly maxTokens: number;
  /** Most directives in one operation. */
  readonly maxDirectives: number;
  /** Highest estimated cost of one operation (src/api/limits/cost.ts says what each field costs). */
  readonly maxCost: number;
  /** Largest HTTP request body, in bytes. */
  readonly maxBodyBytes: number;
  /** Largest WebSocket message, in bytes. */
  readonly maxWsMessageBytes: number;
  /** Open WebSocket connections of one token, per server process. */
  readonly maxConnectionsPerToken: number;
  /** Operations running at once on one WebSocket connection. */
  readonly maxSubscriptionsPerConnection: number;
  /** Failed authentications a client address may make per minute before its attempts get 429. */
  readonly authFailuresPerMinute: number;
  /** Requests without a token a client address may make per minute (HTTP, and operations over anonymous WebSockets); 0: no limit. */
  readonly anonymousRequestsPerMinute: number;
  /** Anonymous WebSockets one client address may hold open at once, per process; 0: no limit. */
  readonly anonymousConnectionsPerAddress: number;
}

/** Reads the limits section from the environment. */
export function readLimitsConfig(env: NodeJS.ProcessEnv): LimitsConfig {
  return {
    maxDepth: intVar(env, 'TAGSCHED_MAX_DEPTH', 15),
    maxAliases: intVar(env, 'TAGSCHED_MAX_ALIASES', 20),
    maxTokens: intVar(env, 'TAGSCHED_MAX_TOKENS', 3000),
    maxDirectives: intVar(env, 'TAGSCHED_MAX_DIRECTIVES', 20),
    maxCost: intVar(env, 'TAGSCHED_MAX_COST', 20_000),
    maxBodyBytes: intVar(env, 'TAGSCHED_MAX_BODY_BYTES', 1024 * 1024), // 1 MiB
    maxWsMessageBytes: intVar(env, 'TAGSCHED_MAX_WS_MESSAGE_BYTES', 1024 * 1024), // 1 MiB
    maxConnectionsPerToken: intVar(env, 'TAGSCHED_MAX_CONNECTIONS_PER_TOKEN', 20),
    maxSubscriptionsPerConnection: intVar(env, 'TAGSCHED_MAX_SUBSCRIPTIONS_PER_CONNECTION', 50),
    authFailuresPerMinute: intVar(env, 'TAGSCHED_AUTH_FAILURES_PER_MINUTE', 30),
    anonymousRequestsPerMinute: intVar(env, 'TAGSCHED_ANONYMOUS_REQUESTS_PER_MINUTE', 600),
    anonymousConnectionsPerAddress: intVar(env, 'TAGSCHED_ANONYMOUS_CONNECTIONS_PER_ADDRESS', 50),
  };
}
