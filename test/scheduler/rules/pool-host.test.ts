/**
 * Where a pool runs (src/scheduler/rules/pool-host.ts): a cloud pool anywhere, a host-bound pool
 * (local, qemu) only on its host, and one with no host (made before pools kept one) anywhere.
 */
import { describe, expect, it } from 'vitest';
import { poolRunsOn } from '../../../src/scheduler/rules/pool-host.js';
import { hostBound, providerFactory, providerTypes, registerProvider } from '../../../src/providers/registry.js';

describe('poolRunsOn', () => {
  it.each([
    // host-bound, pool's host, process's host, runs there
    [false, null, 'build-1', true],
    [false, 'build-2', 'build-1', true], // a host on a cloud pool (not written by the API) is not read
    [true, 'build-1', 'build-1', true],
    [true, 'build-2', 'build-1', false],
    [true, 'Build-1', 'build-1', false], // host names are compared as given
    [true, null, 'build-1', true], // made before pools kept their host: any host, as then
  ] as const)('host-bound %s, pool on %s, process on %s: %s', (bound, host, hostName, runs) => {
    expect(poolRunsOn({ host }, bound, hostName)).toBe(runs);
  });
});

describe('host-bound providers', () => {
  it('are local and qemu; the clouds are not', () => {
    expect(providerTypes().filter(hostBound)).toEqual(['local', 'qemu']);
    expect(providerTypes().filter((type) => !hostBound(type))).toEqual(['exec', 'hetzner', 'ec2']);
  });

  it('may be registered at run time, and put back', () => {
    const restore = registerProvider('bound-stand-in', providerFactory('local')!, { hostBound: true });
    expect(hostBound('bound-stand-in')).toBe(true);
    restore();
    expect(hostBound('bound-stand-in')).toBe(false);
    const over = registerProvider('qemu', providerFactory('local')!);
    expect(hostBound('qemu')).toBe(false);
    over();
    expect(hostBound('qemu')).toBe(true);
  });
});
