import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { ConfigError, intVar } from './variables.js';

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
  /** The proxies whose X-Forwarded-For names the client (src/api/http/client-address.ts); empty: none, the peer is the client. */
  readonly trustedProxies: BlockList;
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
    trustedProxies: addressListVar(env, 'TAGSCHED_TRUSTED_PROXIES'),
  };
}

/** IPv4 and IPv6 addresses and CIDRs separated by commas (none when unset); an entry that is neither is a ConfigError naming it. */
function addressListVar(env: NodeJS.ProcessEnv, name: string): BlockList {
  const list = new BlockList();
  for (const raw of (env[name] ?? '').split(',')) {
    const entry = raw.trim();
    if (!entry) continue;
    const [address, prefix, ...rest] = entry.split('/');
    const family = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : null;
    const bits = prefix === undefined ? null : /^\d{1,3}$/.test(prefix) ? Number(prefix) : -1;
    const refused = new ConfigError(
      `${name} must be IPv4 or IPv6 addresses or CIDRs separated by commas: "${entry}" is neither`,
    );
    if (!family || rest.length || bits === -1 || (bits ?? 0) > (family === 'ipv4' ? 32 : 128)) throw refused;
    try {
      if (bits === null) list.addAddress(address, family);
      else list.addSubnet(address, bits, family);
    } catch {
      throw refused; // one that BlockList refuses, though isIP took it
    }
  }
  return list;
}
