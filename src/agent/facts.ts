/**
 * What this machine is, as the server's WorkerMetadataInput wants it (docs/design.md: workers and interfaces): Debian
 * architectures, CPUs, memory, free disk, executors and tools. Detection goes through a Probe,
 * so that every rule can be tried in a unit test with a made-up machine.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { HostSpeed } from './speed.js';

/** The outside world as detection sees it. */
export interface Probe {
  /** Whether an executable of that name is in PATH. */
  has(command: string): Promise<boolean>;
  /** The names of the executables in PATH that start with `prefix`. */
  commandsStartingWith(prefix: string): Promise<string[]>;
  /** The stdout of a command, or null when it is missing or hangs. */
  output(command: string, args: readonly string[]): Promise<string | null>;
  exists(file: string): Promise<boolean>;
  cpuCount(): number;
  /** Bytes. */
  totalMemory(): number;
  /** Bytes available to this user on the file system of `dir`, or null when unknown. */
  diskFree(dir: string): Promise<number | null>;
  /** Node's `process.arch` and `os.endianness()`. */
  nodeArch(): { arch: string; endianness: 'BE' | 'LE' };
}

/** The system facts, before they become metadata. */
export interface Facts {
  architectures: string[];
  cpuCount: number;
  totalPhysicalMemory: number;
  diskFree: number | null;
  executors: string[];
  tools: string[];
  /** The host's speed scores, measured once at start (speed.ts); null when not measured. */
  speed?: HostSpeed | null;
}

/** One task this agent has a handler for, as the server's TaskVersionInput. */
export interface TaskVersion {
  type: 'worker' | 'server' | 'signing';
  name: string;
  version: number;
}

/** The server's WorkerMetadataInput, as far as the agent fills it. */
export interface WorkerMetadataInput {
  architectures: string[];
  cpuCount: number;
  cpuSpeed?: number;
  cpuSpeedAll?: number;
  totalPhysicalMemory: number;
  diskFree?: number;
  executors: string[];
  tools: string[];
  tasks: TaskVersion[];
  providedTags: string[];
}

/** Tools reported when in PATH; each becomes `worker:cap:{tool}` on the server. */
export const TOOLS = ['sbuild', 'autopkgtest', 'mmdebstrap', 'debsign', 'sbsign'] as const;

/** The version of every task this agent runs (the handler protocol, not the tool's version). */
export const TASK_VERSION = 1;

/** Tasks that are not `worker` tasks; every other handler name is a `worker` task. */
const TASK_TYPES: Readonly<Record<string, TaskVersion['type']>> = {
  debsign: 'signing',
  sign: 'signing',
  generatekey: 'signing',
  servernoop: 'server',
};

/** Node's architecture names → Debian's; `arm` is taken as armhf (armel machines run dpkg anyway). */
const NODE_TO_DEBIAN: Readonly<Record<string, string>> = {
  x64: 'amd64',
  arm64: 'arm64',
  arm: 'armhf',
  ia32: 'i386',
  ppc: 'powerpc',
  s390x: 's390x',
  s390: 's390',
  riscv64: 'riscv64',
  loong64: 'loong64',
  mips: 'mips',
  mipsel: 'mipsel',
  mips64el: 'mips64el',
};

const DEBIAN_ARCH = /^[a-z0-9][a-z0-9-]*$/;

/** The Debian name of Node's architecture, or null for one Debian does not know. */
export function debianArchitecture(arch: string, endianness: 'BE' | 'LE'): string | null {
  if (arch === 'ppc64') return endianness === 'LE' ? 'ppc64el' : 'ppc64';
  return NODE_TO_DEBIAN[arch] ?? null;
}

/** The architectures in `arch-test -n`'s output (one per line; anything that is not an architecture name is skipped). */
export function parseArchTest(stdout: string): string[] {
  return stdout
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => DEBIAN_ARCH.test(line));
}

/** The task type the server files a task name under. */
export function taskTypeOf(name: string): TaskVersion['type'] {
  return TASK_TYPES[name] ?? 'worker';
}

/** What detection found on the machine, before the executor rules read it. */
export interface Presence {
  commands: ReadonlySet<string>;
  qemuSystem: boolean;
  kvm: boolean;
}

/**
 * The executor backends, each with the one rule that makes it available. `unshare` needs `ip`
 * to set up the network namespace; a VM needs /dev/kvm, or it would run at emulation speed.
 */
const EXECUTOR_RULES: readonly { name: string; available: (p: Presence) => boolean }[] = [
  { name: 'unshare', available: (p) => p.commands.has('unshare') && p.commands.has('ip') },
  { name: 'incus-lxc', available: (p) => p.commands.has('incus') },
  { name: 'incus-vm', available: (p) => p.commands.has('incus') && p.kvm },
  { name: 'qemu', available: (p) => p.qemuSystem && p.kvm },
];

/** The executors available on a machine with this presence. */
export function executorsFrom(presence: Presence): string[] {
  return EXECUTOR_RULES.filter((rule) => rule.available(presence)).map((rule) => rule.name);
}

/** Native architecture first (dpkg, else Node's), then what arch-test says runs natively. */
async function detectArchitectures(probe: Probe): Promise<string[]> {
  const dpkg = (await probe.output('dpkg', ['--print-architecture']))?.trim();
  const { arch, endianness } = probe.nodeArch();
  const native = dpkg && DEBIAN_ARCH.test(dpkg) ? dpkg : debianArchitecture(arch, endianness);
  const archTest = (await probe.has('arch-test')) ? parseArchTest((await probe.output('arch-test', ['-n'])) ?? '') : [];
  return [...new Set([...(native ? [native] : []), ...archTest])];
}

/** Detects the facts of this machine; `workDir` is where free disk is measured. */
export async function detectFacts(probe: Probe, workDir: string): Promise<Facts> {
  const names = ['unshare', 'ip', 'incus', ...TOOLS];
  const found = await Promise.all(names.map(async (name) => ((await probe.has(name)) ? name : null)));
  const commands = new Set(found.filter((name): name is string => name !== null));
  const presence: Presence = {
    commands,
    qemuSystem: (await probe.commandsStartingWith('qemu-system-')).length > 0,
    kvm: await probe.exists('/dev/kvm'),
  };
  return {
    architectures: await detectArchitectures(probe),
    cpuCount: probe.cpuCount(),
    totalPhysicalMemory: probe.totalMemory(),
    diskFree: await probe.diskFree(workDir),
    executors: executorsFrom(presence),
    tools: TOOLS.filter((tool) => commands.has(tool)),
  };
}

/** The metadata to report: the facts, one task per handler, and the configured provided tags. */
export function metadataInput(
  facts: Facts,
  handlerNames: Iterable<string>,
  providedTags: readonly string[],
): WorkerMetadataInput {
  const tasks = [...handlerNames].sort().map((name) => ({ type: taskTypeOf(name), name, version: TASK_VERSION }));
  return {
    architectures: facts.architectures,
    cpuCount: facts.cpuCount,
    ...(facts.speed ? { cpuSpeed: facts.speed.single, cpuSpeedAll: facts.speed.all } : {}),
    totalPhysicalMemory: facts.totalPhysicalMemory,
    ...(facts.diskFree === null ? {} : { diskFree: facts.diskFree }),
    executors: facts.executors,
    tools: facts.tools,
    tasks,
    providedTags: [...providedTags],
  };
}

/** A command that does not answer in this time counts as missing (arch-test runs test binaries). */
const PROBE_TIMEOUT_MS = 10_000;

async function isExecutable(file: string): Promise<boolean> {
  try {
    await fs.access(file, fs.constants.X_OK);
    return (await fs.stat(file)).isFile();
  } catch {
    return false;
  }
}

/** The real machine: PATH lookups, child processes with a timeout, os and statfs. */
export function systemProbe(env: NodeJS.ProcessEnv = process.env): Probe {
  const dirs = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
  return {
    async has(command) {
      for (const dir of dirs) if (await isExecutable(path.join(dir, command))) return true;
      return false;
    },
    async commandsStartingWith(prefix) {
      const names = new Set<string>();
      for (const dir of dirs) {
        const entries = await fs.readdir(dir).catch(() => [] as string[]);
        for (const name of entries)
          if (name.startsWith(prefix) && (await isExecutable(path.join(dir, name)))) names.add(name);
      }
      return [...names].sort();
    },
    output(command, args) {
      return new Promise((resolve) => {
        // A non-zero exit still counts when it printed something (arch-test documents no exit
        // status for its listing); a missing command or a timeout does not.
        execFile(command, [...args], { timeout: PROBE_TIMEOUT_MS, env }, (err, stdout) =>
          resolve(err && (typeof err.code !== 'number' || err.killed) ? null : stdout),
        );
      });
    },
    async exists(file) {
      return fs.access(file).then(
        () => true,
        () => false,
      );
    },
    cpuCount: () => os.availableParallelism(),
    totalMemory: () => os.totalmem(),
    async diskFree(dir) {
      try {
        const s = await fs.statfs(dir);
        return s.bavail * s.bsize;
      } catch {
        return null;
      }
    },
    nodeArch: () => ({ arch: process.arch, endianness: os.endianness() }),
  };
}
