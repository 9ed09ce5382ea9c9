/** What the registry needs of an open WebSocket. */
export interface Closable {
  close(code: number, reason: string): void;
}

/** The WebSocket close codes the service uses (graphql-ws keeps 4400–4499 for protocol errors of its own). */
export const CLOSE_CODES = {
  /** A missing, wrong, disabled, revoked or expired token: the agent must not retry with the same token. */
  unauthorized: 4401,
  /** Too many failed authentications from this address, or too many connections for this token: retry later. */
  tooMany: 4429,
  /** The server is stopping: connect again (to another server process, or to this one once it is back). */
  goingAway: 1001,
  /** The server could not accept the connection now (its database failed a statement): connect again later. */
  tryAgainLater: 1013,
} as const;

/** The longest close reason the WebSocket protocol carries, in UTF-8 bytes (RFC 6455: a control frame's 125, less the code's 2). */
export const CLOSE_REASON_MAX_BYTES = 123;

/** A close reason as the protocol can carry it: cut to {@link CLOSE_REASON_MAX_BYTES} between two characters, with "…" where it was cut. */
export function closeReason(reason: string): string {
  if (Buffer.byteLength(reason) <= CLOSE_REASON_MAX_BYTES) return reason;
  const room = CLOSE_REASON_MAX_BYTES - Buffer.byteLength('…');
  let cut = '';
  let bytes = 0;
  for (const ch of reason) {
    const size = Buffer.byteLength(ch);
    if (bytes + size > room) break;
    bytes += size;
    cut += ch;
  }
  return `${cut}…`;
}

/** Closes a WebSocket with `code` and `reason`, the reason cut to what the protocol carries (ws throws on a longer one). */
export function closeSocket(socket: Closable, code: number, reason: string): void {
  socket.close(code, closeReason(reason));
}

// setTimeout takes at most 2^31 - 1 ms (about 24.8 days); a later expiry re-arms the timer.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The open WebSockets of this process, by token: how many a token has (TAGSCHED_MAX_CONNECTIONS_PER_TOKEN
 * is per process), closing them all when the token is revoked, and closing each when its token expires.
 */
export function createConnectionRegistry(options: { maxPerToken: number; now?: () => number }) {
  const now = options.now ?? Date.now;
  const byToken = new Map<number, Set<Closable>>();
  const timers = new Map<Closable, NodeJS.Timeout>();

  function armExpiry(socket: Closable, expiresAt: Date): void {
    const wait = expiresAt.getTime() - now();
    const timer = setTimeout(
      () => {
        timers.delete(socket);
        if (expiresAt.getTime() > now()) armExpiry(socket, expiresAt);
        else closeSocket(socket, CLOSE_CODES.unauthorized, 'Unauthorized: the bearer token has expired');
      },
      Math.max(0, Math.min(wait, MAX_TIMER_MS)),
    );
    timer.unref();
    timers.set(socket, timer);
  }

  return {
    /** Registers a connection of a token; false (and nothing registered) when the token has its maximum already. */
    add(tokenId: number, socket: Closable, expiresAt: Date | null): boolean {
      let set = byToken.get(tokenId);
      if ((set?.size ?? 0) >= options.maxPerToken) return false;
      if (!set) byToken.set(tokenId, (set = new Set()));
      set.add(socket);
      if (expiresAt) armExpiry(socket, expiresAt);
      return true;
    },
    remove(tokenId: number, socket: Closable): void {
      const set = byToken.get(tokenId);
      set?.delete(socket);
      if (set && !set.size) byToken.delete(tokenId);
      clearTimeout(timers.get(socket));
      timers.delete(socket);
    },
    /** Closes every connection of these tokens (revoked); returns how many were closed. */
    closeTokens(tokenIds: readonly number[], reason: string): number {
      let closed = 0;
      for (const id of tokenIds) {
        for (const socket of byToken.get(id) ?? []) {
          closeSocket(socket, CLOSE_CODES.unauthorized, `Unauthorized: ${reason}`);
          closed++;
        }
      }
      return closed;
    },
    /** Open connections of a token in this process. */
    count(tokenId: number): number {
      return byToken.get(tokenId)?.size ?? 0;
    },
  };
}
export type ConnectionRegistry = ReturnType<typeof createConnectionRegistry>;
