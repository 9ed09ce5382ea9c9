import type { IncomingHttpHeaders } from 'node:http';
import { isIPv4, isIPv6, type BlockList } from 'node:net';

/** An address in the one form the limits count it under: an IPv4-mapped IPv6 address as IPv4, IPv6 in lower case; null when it is not an address. */
function canonical(raw: string): string | null {
  const address = raw.trim();
  const mapped = /^::ffff:/i.test(address) ? address.slice(7) : null;
  if (mapped !== null && isIPv4(mapped)) return mapped;
  if (isIPv4(address)) return address;
  if (isIPv6(address)) return address.toLowerCase();
  return null;
}

/** Whether a canonical address is one of the trusted proxies. */
function isTrusted(address: string, trusted: BlockList): boolean {
  return trusted.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
}

/**
 * The address of an HTTP or WebSocket client, the one that the failed-authentication throttle, the
 * anonymous limits and the log lines use (docs/reference/limits.md: client addresses). It is the peer's
 * address, unless the peer is one of `trusted` (TAGSCHED_TRUSTED_PROXIES): then the entries of
 * X-Forwarded-For are read from the right, past those that are trusted too, and the first that is not
 * trusted is the client's (the left-most one when all are). The entries left of it are the client's own
 * say and are not read. A header that is missing, or that has an entry that is not an IP address among
 * those read, leaves the peer's address. An IPv4-mapped IPv6 address counts as its IPv4 address. The
 * PROXY protocol is not read. 'unknown' when the peer's address is gone (its socket closed).
 */
export function clientAddress(peer: string | undefined, headers: IncomingHttpHeaders, trusted: BlockList): string {
  const direct = peer === undefined ? null : canonical(peer);
  if (direct === null) return peer ?? 'unknown';
  if (!isTrusted(direct, trusted)) return direct;
  const header = headers['x-forwarded-for'];
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value?.trim()) return direct;
  const entries = value.split(',');
  for (let i = entries.length - 1; i >= 0; i--) {
    const address = canonical(entries[i]);
    if (address === null) return direct;
    if (i === 0 || !isTrusted(address, trusted)) return address;
  }
  return direct;
}

/** The client address of a request (or of a WebSocket's upgrade request): `clientAddress` of its socket's peer and its headers. */
export function requestAddress(
  req: { readonly socket?: { readonly remoteAddress?: string }; readonly headers: IncomingHttpHeaders },
  trusted: BlockList,
): string {
  return clientAddress(req.socket?.remoteAddress, req.headers, trusted);
}
