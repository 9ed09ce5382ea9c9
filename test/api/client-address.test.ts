import { describe, expect, it } from 'vitest';
import { clientAddress } from '../../src/api/http/client-address.js';
import { readLimitsConfig } from '../../src/core/config/limits.js';
import { ConfigError } from '../../src/core/config/variables.js';

/** The trusted proxies that TAGSCHED_TRUSTED_PROXIES=`value` gives. */
const trusting = (value: string) => readLimitsConfig({ TAGSCHED_TRUSTED_PROXIES: value }).trustedProxies;
const xff = (value: string | string[]) => ({ 'x-forwarded-for': value });

describe('TAGSCHED_TRUSTED_PROXIES', () => {
  it('is empty by default: nobody is trusted, X-Forwarded-For is never read', () => {
    const none = readLimitsConfig({}).trustedProxies;
    expect(clientAddress('127.0.0.1', xff('10.0.0.1'), none)).toBe('127.0.0.1');
    expect(clientAddress('::1', xff('10.0.0.1'), none)).toBe('::1');
  });

  it('takes addresses and CIDRs of both families, with spaces and empty entries around them', () => {
    const list = trusting(' 10.1.0.0/16, 192.0.2.7 ,,2001:db8::/32, ::1 ,');
    for (const peer of ['10.1.255.3', '192.0.2.7', '2001:db8:ff::9', '::1'])
      expect(clientAddress(peer, xff('198.51.100.1'), list)).toBe('198.51.100.1');
    for (const peer of ['10.2.0.1', '192.0.2.8', '2001:db9::1', '::2'])
      expect(clientAddress(peer, xff('198.51.100.1'), list)).toBe(peer);
  });

  it('refuses a bad entry with a ConfigError that names it', () => {
    for (const bad of [
      '10.0.0.0/33',
      '10.0.0.300',
      'proxy.example',
      '10.0.0.0/8/1',
      '10.0.0.0/',
      '::1/129',
      '10.0.0.0/x8',
    ])
      expect(() => trusting(`127.0.0.1, ${bad}`)).toThrow(
        new ConfigError(
          `TAGSCHED_TRUSTED_PROXIES must be IPv4 or IPv6 addresses or CIDRs separated by commas: "${bad}" is neither`,
        ),
      );
  });
});

describe('clientAddress', () => {
  const proxies = trusting('127.0.0.1, 10.9.0.0/16');

  it('an untrusted peer is the client, whatever it sends', () => {
    expect(clientAddress('203.0.113.5', xff('10.0.0.1'), proxies)).toBe('203.0.113.5');
    expect(clientAddress('203.0.113.5', {}, proxies)).toBe('203.0.113.5');
  });

  it('a trusted peer without the header (a probe, a direct call) is the client', () => {
    expect(clientAddress('127.0.0.1', {}, proxies)).toBe('127.0.0.1');
    expect(clientAddress('127.0.0.1', xff('  '), proxies)).toBe('127.0.0.1');
  });

  it('past trusted proxies, the right-most address that is not trusted: what the client put left of it is not read', () => {
    expect(clientAddress('127.0.0.1', xff('10.0.0.1'), proxies)).toBe('10.0.0.1');
    // The client sent "X-Forwarded-For: 1.2.3.4" itself; the proxy appended the address it saw.
    expect(clientAddress('127.0.0.1', xff('1.2.3.4, 10.0.0.1'), proxies)).toBe('10.0.0.1');
    // A chain of two trusted proxies (10.9.x.x in front of 127.0.0.1).
    expect(clientAddress('127.0.0.1', xff('1.2.3.4, 10.0.0.1, 10.9.4.4'), proxies)).toBe('10.0.0.1');
    // A client that names a trusted proxy gains nothing: its own address is appended after.
    expect(clientAddress('127.0.0.1', xff('127.0.0.1, 10.0.0.1'), proxies)).toBe('10.0.0.1');
    // A spoofed chain left of the real client is never read, garbage or not.
    expect(clientAddress('127.0.0.1', xff('not an address, <script>, 10.0.0.1'), proxies)).toBe('10.0.0.1');
  });

  it('all trusted: the left-most', () => {
    expect(clientAddress('127.0.0.1', xff('10.9.0.1, 10.9.0.2, 127.0.0.1'), proxies)).toBe('10.9.0.1');
  });

  it('repeated headers are read as one list, in order', () => {
    expect(clientAddress('127.0.0.1', xff(['1.2.3.4', '10.0.0.1, 10.9.0.2']), proxies)).toBe('10.0.0.1');
  });

  it('a malformed value among the entries read leaves the peer', () => {
    for (const value of [
      'garbage',
      '10.0.0.1:8080',
      '10.0.0.1, ',
      '10.0.0.1,,10.9.0.1',
      '10.0.0.1, unknown',
      '[2001:db8::1]',
      '10.0.0.256',
      '10.0.0.1\u0000',
      'x'.repeat(10_000),
    ])
      expect(clientAddress('127.0.0.1', xff(value), proxies), value).toBe('127.0.0.1');
  });

  it('IPv6: peers, entries and forwarded addresses; written in lower case', () => {
    const v6 = trusting('fd00::/8, ::1');
    expect(clientAddress('::1', xff('2001:DB8::1'), v6)).toBe('2001:db8::1');
    expect(clientAddress('fd00::5', xff('2001:db8::1, fd12::1'), v6)).toBe('2001:db8::1');
    expect(clientAddress('fe00::5', xff('2001:db8::1'), v6)).toBe('fe00::5');
    // A forwarded IPv4 client behind IPv6 proxies.
    expect(clientAddress('::1', xff('192.0.2.1'), v6)).toBe('192.0.2.1');
  });

  it('IPv4-mapped IPv6 addresses match IPv4 entries and count as their IPv4 address', () => {
    // A server listening on :: sees IPv4 peers as ::ffff:a.b.c.d.
    expect(clientAddress('::ffff:127.0.0.1', xff('10.0.0.1'), proxies)).toBe('10.0.0.1');
    expect(clientAddress('::FFFF:10.9.1.1', xff('10.0.0.1'), proxies)).toBe('10.0.0.1');
    expect(clientAddress('::ffff:203.0.113.5', xff('10.0.0.1'), proxies)).toBe('203.0.113.5');
    expect(clientAddress('127.0.0.1', xff('::ffff:10.0.0.1, ::ffff:10.9.0.1'), proxies)).toBe('10.0.0.1');
    // The same client through a proxy or directly is one address for the limits.
    expect(clientAddress('::ffff:10.0.0.1', {}, proxies)).toBe(clientAddress('127.0.0.1', xff('10.0.0.1'), proxies));
  });

  it('many entries: a long chain of trusted hops is walked to the client; a long spoofed prefix is not read', () => {
    const hops = Array.from({ length: 1_000 }, (_, i) => `10.9.${i >> 8}.${i & 255}`);
    expect(clientAddress('127.0.0.1', xff(['10.0.0.1', ...hops].join(', ')), proxies)).toBe('10.0.0.1');
    const spoofed = Array.from({ length: 1_000 }, (_, i) => `1.2.${i >> 8}.${i & 255}`);
    expect(clientAddress('127.0.0.1', xff([...spoofed, '10.0.0.2'].join(',')), proxies)).toBe('10.0.0.2');
    const many = trusting(Array.from({ length: 300 }, (_, i) => `192.168.${i % 256}.${i >> 8}`).join(','));
    expect(clientAddress('192.168.42.0', xff('10.0.0.3'), many)).toBe('10.0.0.3');
    expect(clientAddress('192.168.42.9', xff('10.0.0.3'), many)).toBe('192.168.42.9');
  });

  it('a peer whose address is gone is "unknown"', () => {
    expect(clientAddress(undefined, xff('10.0.0.1'), proxies)).toBe('unknown');
  });
});
