import type { EntityManager } from '@mikro-orm/postgresql';
import { throttledMessage, type AuthThrottle } from './limits/auth-throttle.js';
import { capText, type Logger } from '../core/log.js';
import { authenticate, BadTokenError, type Authenticated } from '../services/identity/auth.js';

/** Why a client was turned away before its operation ran: 401 (a bad token) or 429 (throttled). */
export class ClientRefusal extends Error {
  constructor(
    readonly status: 401 | 429,
    message: string,
  ) {
    super(message);
    this.name = 'ClientRefusal';
  }
}

/**
 * Authenticates a client of HTTP or WebSocket from its address and presented token: the lookup is
 * reserved with the failure throttle first, and an address that failed too often is refused (429)
 * before the token is looked up; a failure is counted and logged at warn (a client mistake, or someone
 * guessing: never an error, never the token itself). The token of a worker that was stopped is no
 * guess: the agent of a pool instance being scaled down calls until it exits. It is refused (401)
 * without counting, and logged at info.
 */
export function createClientAuth(throttle: AuthThrottle, log: Logger) {
  return async function authenticateClient(
    em: EntityManager,
    presented: string | null | undefined,
    address: string,
  ): Promise<Authenticated> {
    if (!presented) return authenticate(em, presented);
    const attempt = await throttle.reserve(address);
    if (typeof attempt === 'number') {
      log.warn({ address: capText(address, 64), retryAfterMs: attempt }, 'authentication throttled');
      throw new ClientRefusal(429, throttledMessage(attempt));
    }
    try {
      const authenticated = await authenticate(em, presented);
      attempt.succeeded();
      return authenticated;
    } catch (err) {
      if (!(err instanceof BadTokenError)) {
        attempt.succeeded(); // not the token's fault (the database, say): it counts for nothing
        throw err;
      }
      if (err.retired) {
        attempt.succeeded();
        log.info({ address: capText(address, 64) }, 'a stopped worker was turned away');
        throw new ClientRefusal(401, err.message);
      }
      attempt.failed();
      log.warn({ address: capText(address, 64), reason: err.message }, 'authentication failed');
      throw new ClientRefusal(401, err.message);
    }
  };
}
export type ClientAuth = ReturnType<typeof createClientAuth>;
