import { boolVar, ConfigError } from './variables.js';

/** The shortest TAGSCHED_METRICS_TOKEN accepted: a scraper's token is a secret like any other. */
export const MIN_METRICS_TOKEN_LENGTH = 16;

/** What the interface offers besides the operations: GraphiQL, introspection, field suggestions, /metrics. */
export interface ApiConfig {
  /** Whether /graphql serves GraphiQL to browsers; off when NODE_ENV is production. */
  readonly graphiql: boolean;
  /** Whether introspection (`__schema`, `__type`) is answered; off in production unless asked for. */
  readonly introspection: boolean;
  /** Whether validation errors suggest field names ("Did you mean …?"); off in production unless asked for. */
  readonly fieldSuggestions: boolean;
  /** The bearer token /metrics asks for, and then shows every workspace by name; null: /metrics is open and folds private workspaces. */
  readonly metricsToken: string | null;
}

/** Reads the api section from the environment. */
export function readApiConfig(env: NodeJS.ProcessEnv): ApiConfig {
  const production = env.NODE_ENV === 'production';
  return {
    graphiql: !production,
    introspection: boolVar(env, 'TAGSCHED_INTROSPECTION', !production),
    fieldSuggestions: boolVar(env, 'TAGSCHED_FIELD_SUGGESTIONS', !production),
    metricsToken: metricsTokenVar(env),
  };
}

function metricsTokenVar(env: NodeJS.ProcessEnv): string | null {
  const raw = env.TAGSCHED_METRICS_TOKEN;
  if (!raw) return null;
  if (raw.length < MIN_METRICS_TOKEN_LENGTH || /\s/.test(raw)) {
    throw new ConfigError(
      `TAGSCHED_METRICS_TOKEN must be at least ${MIN_METRICS_TOKEN_LENGTH} characters with no whitespace`,
    );
  }
  return raw;
}
