/**
 * Each run in its own memory cgroup, where the machine allows: a leaf `tagsched-run-<agent pid>-<id>` under the
 * agent's own cgroup, which the handler enters before it starts (runner.ts's join wrapper), so that
 * the kernel counts every page its processes are charged for and keeps the peak. The agent creates
 * the leaf as itself and gives nothing in it to the handler's user: a handler run as another user
 * cannot write the leaf's control files (reset the peak, lift the limit, leave the leaf).
 *
 * - cgroup v2 (the unified hierarchy): the leaf's `cgroup.controllers` must list `memory` (the
 *   agent turns it on in its own cgroup's `cgroup.subtree_control` when it can, see
 *   enableMemoryController) and it must have
 *   `memory.peak` (Linux 5.19 or later); the OOM kills are `memory.events`' `oom_kill`.
 * - cgroup v1: the memory hierarchy's `memory.max_usage_in_bytes`, and `memory.oom_control`'s
 *   `oom_kill`.
 * - neither (or `--memory-cgroup off`): measure.ts sums the process tree's resident sets.
 *
 * The agent does not go through systemd (`systemd-run --scope`): it writes the cgroup file system
 * itself, which is what a service with `Delegate=yes` or a container that mounts its cgroup writable
 * allows.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The start of every run's leaf name; the agent's pid follows (runner.ts's cgroupLeafName). */
export const LEAF_PREFIX = 'tagsched-run-';

/** What `--memory-cgroup` may say. */
export const MEMORY_CGROUP_CHOICES = ['auto', 'off'] as const;
export type MemoryCgroupChoice = (typeof MEMORY_CGROUP_CHOICES)[number];

/** Where runs' leaves are made, or why they are not. */
export type MemoryCgroup = { kind: 'v2' | 'v1'; parent: string } | { kind: 'none'; why: string };

/** The agent's cgroups, from /proc/self/cgroup: the unified path (`0::/path`) and the v1 memory hierarchy's. */
export function parseProcCgroup(text: string): { unified: string | null; memoryV1: string | null } {
  let unified: string | null = null;
  let memoryV1: string | null = null;
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const id = line.slice(0, first);
    const controllers = line.slice(first + 1, second);
    const where = line.slice(second + 1);
    if (id === '0' && controllers === '') unified = where;
    else if (controllers.split(',').includes('memory')) memoryV1 = where;
  }
  return { unified, memoryV1 };
}

/** A cgroup file system mounted here: its type, the cgroup at its root, and where it is mounted. */
export interface CgroupMount {
  type: 'cgroup2' | 'cgroup';
  /** The v1 controllers it carries (super options); empty for cgroup2. */
  options: string[];
  root: string;
  mountPoint: string;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));

/** The cgroup mounts of /proc/self/mountinfo. */
export function parseCgroupMounts(text: string): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of text.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!before || !after) continue;
    const fields = before.split(' ');
    const [type, , superOptions] = after.split(' ');
    if ((type !== 'cgroup2' && type !== 'cgroup') || fields.length < 5) continue;
    mounts.push({
      type,
      options: type === 'cgroup' ? (superOptions ?? '').split(',') : [],
      root: unescape(fields[3]),
      mountPoint: unescape(fields[4]),
    });
  }
  return mounts;
}

/** The directory of cgroup `cgroupPath` in `mount`, or null when the mount does not show it. */
export function cgroupDir(mount: CgroupMount, cgroupPath: string): string | null {
  const root = mount.root === '/' ? '' : mount.root;
  if (cgroupPath !== root && !cgroupPath.startsWith(`${root}/`) && root !== '') return null;
  const inside = cgroupPath.slice(root.length);
  if (inside.split('/').includes('..')) return null;
  return path.join(mount.mountPoint, inside).replace(/(.)\/+$/, '$1');
}

const read = (file: string): string | null => {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
};

/** Writes a control file, opened for writing only (cgroup.kill cannot be read); never creates one (a cgroup's files are the kernel's). */
function writeControl(file: string, value: string): void {
  const fd = fs.openSync(file, fs.constants.O_WRONLY);
  try {
    fs.writeSync(fd, value);
  } finally {
    fs.closeSync(fd);
  }
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The files the leaf of each kind must have to be measured. */
const PEAK_FILE = { v2: 'memory.peak', v1: 'memory.max_usage_in_bytes' } as const;

/** Turns on the cpu controller for the children too, where it is delegated: runs then get a CPU weight (createLeaf). */
function enableCpuController(subtree: string): void {
  try {
    writeControl(subtree, '+cpu');
  } catch {
    // not delegated: runs share the CPUs by the kernel's default
  }
}

/**
 * Turns on the memory controller for the children of `parent` (cgroup v2), or says why it cannot.
 * The kernel refuses it while processes live in `parent` itself (but for the root cgroup). When the
 * agent is the only one there, as the main process of a systemd service with `Delegate=`, it moves
 * itself into a child `tagsched-agent` first, which is what a delegated subtree is for; it never
 * moves another process.
 */
function enableMemoryController(parent: string): string | null {
  const subtree = path.join(parent, 'cgroup.subtree_control');
  try {
    writeControl(subtree, '+memory');
    return null;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EBUSY')
      return `the memory controller is not delegated to ${parent} (cgroup.subtree_control: ${messageOf(err)})`;
  }
  const procs = (read(path.join(parent, 'cgroup.procs')) ?? '').split('\n').filter(Boolean);
  if (procs.length !== 1 || procs[0] !== String(process.pid)) {
    return `other processes than the agent live in its cgroup ${parent}, which cannot give the memory controller to its children then`;
  }
  const home = path.join(parent, 'tagsched-agent');
  try {
    if (!fs.existsSync(home)) fs.mkdirSync(home);
    writeControl(path.join(home, 'cgroup.procs'), String(process.pid));
    writeControl(subtree, '+memory');
    return null;
  } catch (err) {
    try {
      writeControl(path.join(parent, 'cgroup.procs'), String(process.pid));
      fs.rmdirSync(home);
    } catch {
      // stays where it is
    }
    return `the agent cannot move itself into ${home} to give the memory controller to its runs: ${messageOf(err)}`;
  }
}

/** Why a trial leaf under `parent` cannot measure a run, or null when it can (the leaf is removed either way). */
function trial(kind: 'v2' | 'v1', parent: string): string | null {
  const leaf = path.join(parent, `tagsched-probe-${process.pid}`);
  try {
    removeLeafNow(leaf);
    fs.mkdirSync(leaf);
  } catch (err) {
    return `cannot create a cgroup in ${parent}: ${messageOf(err)}`;
  }
  try {
    if (kind === 'v2' && !(read(path.join(leaf, 'cgroup.controllers')) ?? '').split(/\s+/).includes('memory')) {
      const why = enableMemoryController(parent);
      if (why !== null) return why;
      if (!(read(path.join(leaf, 'cgroup.controllers')) ?? '').split(/\s+/).includes('memory'))
        return `the memory controller is not available in ${parent}`;
    }
    if (kind === 'v2') enableCpuController(path.join(parent, 'cgroup.subtree_control'));
    if (!fs.existsSync(path.join(leaf, PEAK_FILE[kind])))
      return `${PEAK_FILE[kind]} is missing in ${parent} (the kernel is too old)`;
    const joined = spawnSync(
      '/bin/sh',
      ['-c', JOIN_SHELL, 'tagsched-probe', path.join(leaf, 'cgroup.procs'), '/bin/sh', '-c', 'exit 0'],
      {
        stdio: ['ignore', 'ignore', 'ignore', 'ignore', 'ignore', 'pipe'],
        timeout: 10_000,
        encoding: 'utf8',
      },
    );
    const said = (joined.output?.[5] as string | null | undefined) ?? '';
    if (!said.startsWith('joined')) return `a process cannot be moved into a cgroup in ${parent}`;
    return null;
  } finally {
    removeLeafNow(leaf);
  }
}

/**
 * How a process enters a run's cgroup before it becomes the handler: `$1` is the leaf's
 * cgroup.procs, the rest the command. The shell writes its own pid there, says `joined` on fd 5 when
 * it could (the agent then knows the cgroup holds the whole run), closes fd 5 and becomes the
 * command: nothing of the run exists outside the leaf. When the write fails the command runs all the
 * same, measured by its process tree. The path and the command are arguments, never shell text.
 */
export const JOIN_SHELL = [
  'procs=$1; shift',
  'if { echo $$ > "$procs"; } 2>/dev/null; then echo joined >&5; fi',
  'exec 5>&-',
  'exec "$@"',
].join('\n');

/**
 * Removes the empty leaves of agents that are gone (killed before they could remove them): those
 * whose pid no process has here. A leaf that still holds processes stays (the pid may be of an agent
 * in another PID namespace that shares this cgroup); so does any other agent's. Returns `parent`.
 */
function removeLeftovers(parent: string): string {
  let names: string[] = [];
  try {
    names = fs.readdirSync(parent);
  } catch {
    return parent;
  }
  for (const name of names) {
    const pid = Number(new RegExp(`^${LEAF_PREFIX}(\\d+)-`).exec(name)?.[1]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') continue;
      try {
        fs.rmdirSync(path.join(parent, name)); // refused while it holds a process
      } catch {
        // busy, or gone meanwhile
      }
    }
  }
  return parent;
}

/** Where the runs' leaves go, trying a leaf of each kind (v2 first) under the agent's own cgroup. */
export function planMemoryCgroup(
  choice: MemoryCgroupChoice,
  files: { procCgroup?: string; mountinfo?: string } = {},
): MemoryCgroup {
  if (choice === 'off') return { kind: 'none', why: 'turned off by --memory-cgroup off (TAGSCHED_MEMORY_CGROUP)' };
  const own = parseProcCgroup(files.procCgroup ?? read('/proc/self/cgroup') ?? '');
  const mounts = parseCgroupMounts(files.mountinfo ?? read('/proc/self/mountinfo') ?? '');
  const reasons: string[] = [];
  const unifiedMount = mounts.find((m) => m.type === 'cgroup2');
  if (own.unified !== null && unifiedMount) {
    const parent = cgroupDir(unifiedMount, own.unified);
    const why = parent
      ? trial('v2', parent)
      : `the agent's cgroup ${own.unified} is not under ${unifiedMount.mountPoint}`;
    if (why === null && parent) return { kind: 'v2', parent: removeLeftovers(parent) };
    reasons.push(`cgroup v2: ${why}`);
  } else reasons.push('cgroup v2: not mounted');
  const memoryMount = mounts.find((m) => m.type === 'cgroup' && m.options.includes('memory'));
  if (own.memoryV1 !== null && memoryMount) {
    const parent = cgroupDir(memoryMount, own.memoryV1);
    const why = parent
      ? trial('v1', parent)
      : `the agent's cgroup ${own.memoryV1} is not under ${memoryMount.mountPoint}`;
    if (why === null && parent) return { kind: 'v1', parent: removeLeftovers(parent) };
    reasons.push(`cgroup v1: ${why}`);
  } else reasons.push('cgroup v1: no memory hierarchy');
  return { kind: 'none', why: reasons.join('; ') };
}

/** A line for the log: how peak memory is measured. */
export function describeMemoryCgroup(plan: MemoryCgroup): Record<string, unknown> {
  if (plan.kind === 'none') return { memoryMethod: 'PROCESS_TREE', why: plan.why };
  return { memoryMethod: plan.kind === 'v2' ? 'CGROUP_V2' : 'CGROUP_V1', cgroup: plan.parent };
}

/** `oom_kill N` in memory.events (v2) or memory.oom_control (v1); null when unreadable. */
export function oomKillsOf(text: string | null): number | null {
  const match = /^oom_kill (\d+)$/m.exec(text ?? '');
  return match ? Number(match[1]) : null;
}

/** One run's cgroup. */
export interface Leaf {
  readonly kind: 'v2' | 'v1';
  readonly dir: string;
  /** Where a process writes its pid to enter. */
  readonly procsFile: string;
  /** The memory limit set on it, in bytes; null: none. */
  readonly limitBytes: number | null;
  /** The kernel's peak of the memory charged to the leaf, in bytes; null when unreadable. */
  peakBytes(): number | null;
  /** How many of its processes the OOM killer killed; null when unreadable. */
  oomKills(): number | null;
  /** Kills what is left in it and removes it; never throws. */
  remove(): Promise<void>;
}

/** Kills the processes of a leaf and removes it at once; true when it is gone. */
function removeLeafNow(dir: string): boolean {
  if (!fs.existsSync(dir)) return true;
  try {
    writeControl(path.join(dir, 'cgroup.kill'), '1');
  } catch {
    // v1, or a kernel before 5.14: one by one
    for (const pid of (read(path.join(dir, 'cgroup.procs')) ?? '').split('\n')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
  }
  try {
    fs.rmdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes the leaf `name` under the plan's parent (a leftover of the same name, from an agent that
 * was killed, is emptied and removed first), with a memory limit when `limitBytes` is given (swap
 * included, where the kernel counts it), and a CPU weight when `cpuWeight` is given and the leaf has
 * `cpu.weight` (v2 with the cpu controller; without it the weight is left out). Throws when it cannot.
 */
export function createLeaf(
  plan: { kind: 'v2' | 'v1'; parent: string },
  name: string,
  limitBytes: number | null,
  cpuWeight: number | null = null,
): Leaf {
  const dir = path.join(plan.parent, name);
  removeLeafNow(dir);
  fs.mkdirSync(dir);
  try {
    if (limitBytes !== null) {
      if (plan.kind === 'v2') {
        writeControl(path.join(dir, 'memory.max'), String(limitBytes));
        if (fs.existsSync(path.join(dir, 'memory.swap.max'))) writeControl(path.join(dir, 'memory.swap.max'), '0');
      } else {
        writeControl(path.join(dir, 'memory.limit_in_bytes'), String(limitBytes));
        if (fs.existsSync(path.join(dir, 'memory.memsw.limit_in_bytes')))
          writeControl(path.join(dir, 'memory.memsw.limit_in_bytes'), String(limitBytes));
      }
    }
    if (cpuWeight !== null && plan.kind === 'v2' && fs.existsSync(path.join(dir, 'cpu.weight')))
      writeControl(path.join(dir, 'cpu.weight'), String(cpuWeight));
  } catch (err) {
    removeLeafNow(dir);
    throw err;
  }
  const eventsFile = path.join(dir, plan.kind === 'v2' ? 'memory.events' : 'memory.oom_control');
  return {
    kind: plan.kind,
    dir,
    procsFile: path.join(dir, 'cgroup.procs'),
    limitBytes,
    peakBytes() {
      const value = Number((read(path.join(dir, PEAK_FILE[plan.kind])) ?? '').trim());
      return Number.isSafeInteger(value) && value >= 0 ? value : null;
    },
    oomKills: () => oomKillsOf(read(eventsFile)),
    async remove() {
      // The processes die asynchronously: the directory can be removed once they are gone.
      for (let attempt = 0; attempt < 50; attempt++) {
        if (removeLeafNow(dir)) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}
