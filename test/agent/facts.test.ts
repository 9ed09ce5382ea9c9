import { describe, expect, it } from 'vitest';
import {
  debianArchitecture,
  detectFacts,
  executorsFrom,
  metadataInput,
  parseArchTest,
  taskTypeOf,
  type Facts,
  type Presence,
  type Probe,
} from '../../src/agent/facts.js';

const GIB = 1024 ** 3;

/** A made-up machine: the commands in PATH, the files that exist, and what commands print. */
function fakeProbe(machine: {
  commands?: string[];
  files?: string[];
  outputs?: Record<string, string>;
  arch?: string;
  endianness?: 'BE' | 'LE';
  diskFree?: number | null;
}): Probe & { calls: string[] } {
  const commands = new Set(machine.commands ?? []);
  const calls: string[] = [];
  return {
    calls,
    has: async (c) => commands.has(c),
    commandsStartingWith: async (prefix) => [...commands].filter((c) => c.startsWith(prefix)),
    output: async (c, args) => {
      calls.push([c, ...args].join(' '));
      return commands.has(c) ? (machine.outputs?.[[c, ...args].join(' ')] ?? '') : null;
    },
    exists: async (f) => (machine.files ?? []).includes(f),
    cpuCount: () => 8,
    totalMemory: () => 16 * GIB,
    diskFree: async () => (machine.diskFree === undefined ? 100 * GIB : machine.diskFree),
    nodeArch: () => ({ arch: machine.arch ?? 'x64', endianness: machine.endianness ?? 'LE' }),
  };
}

describe('debianArchitecture', () => {
  it.each<[string, 'BE' | 'LE', string | null]>([
    ['x64', 'LE', 'amd64'],
    ['arm64', 'LE', 'arm64'],
    ['arm', 'LE', 'armhf'],
    ['ia32', 'LE', 'i386'],
    ['ppc64', 'LE', 'ppc64el'],
    ['ppc64', 'BE', 'ppc64'],
    ['ppc', 'BE', 'powerpc'],
    ['s390x', 'BE', 's390x'],
    ['riscv64', 'LE', 'riscv64'],
    ['loong64', 'LE', 'loong64'],
    ['mipsel', 'LE', 'mipsel'],
    ['mips64el', 'LE', 'mips64el'],
    ['wasm32', 'LE', null],
  ])('maps Node %s (%s) to %s', (arch, endianness, expected) => {
    expect(debianArchitecture(arch, endianness)).toBe(expected);
  });
});

describe('parseArchTest', () => {
  it.each<[string, string, string[]]>([
    ['one per line', 'amd64\ni386\nx32\n', ['amd64', 'i386', 'x32']],
    ['surrounding blanks', '  arm64 \n\narmhf\n', ['arm64', 'armhf']],
    ['nothing', '', []],
    ['lines that are not architecture names', 'amd64\nwarning: no helper for ia64\nI386\n', ['amd64']],
  ])('reads %s', (_name, stdout, expected) => {
    expect(parseArchTest(stdout)).toEqual(expected);
  });
});

describe('executorsFrom', () => {
  const presence = (commands: string[], more: Partial<Presence> = {}): Presence => ({
    commands: new Set(commands),
    qemuSystem: false,
    kvm: false,
    ...more,
  });
  it.each<[string, Presence, string[]]>([
    ['nothing', presence([]), []],
    ['unshare and ip', presence(['unshare', 'ip']), ['unshare']],
    ['unshare without ip', presence(['unshare']), []],
    ['incus without /dev/kvm', presence(['incus']), ['incus-lxc']],
    ['incus with /dev/kvm', presence(['incus'], { kvm: true }), ['incus-lxc', 'incus-vm']],
    ['qemu-system without /dev/kvm', presence([], { qemuSystem: true }), []],
    ['qemu-system with /dev/kvm', presence([], { qemuSystem: true, kvm: true }), ['qemu']],
    [
      'everything',
      presence(['unshare', 'ip', 'incus'], { qemuSystem: true, kvm: true }),
      ['unshare', 'incus-lxc', 'incus-vm', 'qemu'],
    ],
  ])('%s', (_name, p, expected) => {
    expect(executorsFrom(p)).toEqual(expected);
  });
});

describe('detectFacts', () => {
  it('reads a build machine: dpkg and arch-test, executors, tools, sizes', async () => {
    const probe = fakeProbe({
      commands: ['dpkg', 'arch-test', 'unshare', 'ip', 'qemu-system-x86_64', 'sbuild', 'mmdebstrap', 'debsign'],
      files: ['/dev/kvm'],
      outputs: { 'dpkg --print-architecture': 'amd64\n', 'arch-test -n': 'amd64\ni386\nx32\n' },
      diskFree: 50 * GIB,
    });
    expect(await detectFacts(probe, '/srv/work')).toEqual<Facts>({
      architectures: ['amd64', 'i386', 'x32'],
      cpuCount: 8,
      totalPhysicalMemory: 16 * GIB,
      diskFree: 50 * GIB,
      executors: ['unshare', 'qemu'],
      tools: ['sbuild', 'mmdebstrap', 'debsign'],
    });
    expect(probe.calls).toContain('arch-test -n');
  });

  it('falls back on Node’s architecture without dpkg, and skips arch-test when it is missing', async () => {
    const probe = fakeProbe({ commands: [], arch: 'arm64' });
    const facts = await detectFacts(probe, '/w');
    expect(facts.architectures).toEqual(['arm64']);
    expect(facts.executors).toEqual([]);
    expect(facts.tools).toEqual([]);
    expect(probe.calls).not.toContain('arch-test -n');
  });

  it('ignores dpkg output that is not an architecture name', async () => {
    const probe = fakeProbe({
      commands: ['dpkg'],
      outputs: { 'dpkg --print-architecture': '' },
      arch: 'ppc64',
      endianness: 'LE',
    });
    expect((await detectFacts(probe, '/w')).architectures).toEqual(['ppc64el']);
  });

  it('lists the native architecture once, first', async () => {
    const probe = fakeProbe({
      commands: ['dpkg', 'arch-test'],
      outputs: { 'dpkg --print-architecture': 'arm64\n', 'arch-test -n': 'armhf\narm64\narmel\n' },
    });
    expect((await detectFacts(probe, '/w')).architectures).toEqual(['arm64', 'armhf', 'armel']);
  });

  it('reports no disk when the work dir cannot be measured', async () => {
    expect((await detectFacts(fakeProbe({ diskFree: null }), '/w')).diskFree).toBeNull();
  });
});

describe('metadataInput', () => {
  const facts: Facts = {
    architectures: ['amd64'],
    cpuCount: 4,
    totalPhysicalMemory: 8 * GIB,
    diskFree: 20 * GIB,
    executors: ['unshare'],
    tools: ['sbuild'],
  };

  it('reports one task per handler, typed, at version 1, sorted', () => {
    const m = metadataInput(
      facts,
      ['sbuild', 'debsign', 'servernoop', 'generatekey', 'sign', 'noop'],
      ['worker:cap:kvm'],
    );
    expect(m).toEqual({
      architectures: ['amd64'],
      cpuCount: 4,
      totalPhysicalMemory: 8 * GIB,
      diskFree: 20 * GIB,
      executors: ['unshare'],
      tools: ['sbuild'],
      providedTags: ['worker:cap:kvm'],
      tasks: [
        { type: 'signing', name: 'debsign', version: 1 },
        { type: 'signing', name: 'generatekey', version: 1 },
        { type: 'worker', name: 'noop', version: 1 },
        { type: 'worker', name: 'sbuild', version: 1 },
        { type: 'server', name: 'servernoop', version: 1 },
        { type: 'signing', name: 'sign', version: 1 },
      ],
    });
  });

  it('leaves diskFree out when unknown', () => {
    expect(metadataInput({ ...facts, diskFree: null }, [], [])).not.toHaveProperty('diskFree');
  });

  it.each([
    ['debsign', 'signing'],
    ['sign', 'signing'],
    ['generatekey', 'signing'],
    ['servernoop', 'server'],
    ['sbuild', 'worker'],
    ['my-custom-task', 'worker'],
  ])('files %s under %s', (name, type) => {
    expect(taskTypeOf(name)).toBe(type);
  });
});
