/**
 * What one run used, measured by the agent while the handler runs: peak memory of the run's own
 * memory cgroup when it has one (cgroup.ts: the kernel's peak, read at the end), else of the
 * handler's process tree (the sum of the resident sets of the processes descending from the
 * handler's first process, sampled from /proc); whether the OOM killer struck (the cgroup's
 * oom_kill count, else the machine's when the handler died of SIGKILL); whether the run directory's
 * file system ran full (its free space sampled with statfs); peak disk used in the run's directory (its files' allocated
 * blocks, walked at an interval and once more at the end), and CPU time (user + system of the
 * whole tree: what the run's monitor shell reports with `times` when it has waited for the
 * handler, else the tree's counters as last sampled).
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

import type { MemoryMethod } from '../shared/run-statistics.js';
import { oomKillsOf, type Leaf } from './cgroup.js';

/** What the run used, as the agent measured it. */
export interface RunUsage {
  cpuSeconds: number | null;
  peakMemoryBytes: number | null;
  peakDiskBytes: number | null;
  memoryMethod: MemoryMethod;
  /** The OOM killer killed a process of the run; null when unknown. */
  outOfMemory: boolean | null;
  /** The memory limit of the run's cgroup, in bytes; null: none (or no cgroup). */
  memoryLimitBytes: number | null;
  /** The run directory's file system had less than DISK_FULL_BYTES free at a sample; null when never sampled. */
  diskFull: boolean | null;
}

/** Free space under which the run directory's file system counts as full. */
export const DISK_FULL_BYTES = 1024 * 1024;

/** Between two samples of the process tree, in milliseconds. */
export const MEMORY_SAMPLE_MS = 100;
/** Between two walks of the run directory, in milliseconds. */
export const DISK_SAMPLE_MS = 1000;
/** A walk of the run directory stops after this many entries (a bigger tree is counted this far). */
export const MAX_WALK_ENTRIES = 200_000;

const PAGE_SIZE = 4096;
/** The kernel's clock ticks per second for /proc/PID/stat (USER_HZ, 100 on every Linux architecture). */
const TICKS_PER_SECOND = 100;

interface ProcEntry {
  ppid: number;
  /** utime + stime + cutime + cstime, in ticks. */
  ticks: number;
}

/** /proc/PID/stat: the fields after the command name (which may hold spaces and parentheses). */
function readStat(pid: string): ProcEntry | null {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is the state (field 3); ppid is field 4, utime..cstime fields 14..17.
  const ppid = Number(fields[1]);
  const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  return Number.isFinite(ppid) ? { ppid, ticks: Number.isFinite(ticks) ? ticks : 0 } : null;
}

function residentBytes(pid: number): number {
  try {
    const resident = Number(fs.readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
    return Number.isFinite(resident) ? resident * PAGE_SIZE : 0;
  } catch {
    return 0;
  }
}

/** The processes descending from `root` (itself included), with their CPU ticks. */
function tree(root: number): Map<number, ProcEntry> {
  const children = new Map<number, number[]>();
  const entries = new Map<number, ProcEntry>();
  let names: string[];
  try {
    names = fs.readdirSync('/proc');
  } catch {
    return entries;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const entry = readStat(name);
    if (!entry) continue;
    const pid = Number(name);
    entries.set(pid, entry);
    const list = children.get(entry.ppid);
    if (list) list.push(pid);
    else children.set(entry.ppid, [pid]);
  }
  const found = new Map<number, ProcEntry>();
  const queue = [root];
  while (queue.length) {
    const pid = queue.pop()!;
    const entry = entries.get(pid);
    if (!entry || found.has(pid)) continue;
    found.set(pid, entry);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/** Allocated bytes of everything under `dir` (symbolic links not followed, hard links once); null when unreadable. */
export async function diskUsage(dir: string): Promise<number | null> {
  let total = 0;
  let seen = 0;
  const inodes = new Set<string>();
  const stack = [dir];
  try {
    const top = await fsp.lstat(dir);
    total += top.blocks * 512;
  } catch {
    return null;
  }
  while (stack.length && seen < MAX_WALK_ENTRIES) {
    const current = stack.pop()!;
    let names: fs.Dirent[];
    try {
      names = await fsp.readdir(current, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of names) {
      if (++seen > MAX_WALK_ENTRIES) break;
      const full = path.join(current, entry.name);
      try {
        const st = await fsp.lstat(full);
        if (st.nlink > 1) {
          const key = `${st.dev}:${st.ino}`;
          if (inodes.has(key)) continue;
          inodes.add(key);
        }
        total += st.blocks * 512;
        if (st.isDirectory()) stack.push(full);
      } catch {
        // gone meanwhile
      }
    }
  }
  return total;
}

/** `times` output: the second line is the children's user and system time, as `XmY.YYYs XmY.YYYs`. */
export function parseTimes(text: string): number | null {
  const line = text.trim().split('\n')[1];
  if (!line) return null;
  const parts = [...line.matchAll(/(\d+)m([\d.]+)s/g)];
  if (parts.length !== 2) return null;
  const seconds = parts.reduce((sum, m) => sum + Number(m[1]) * 60 + Number(m[2]), 0);
  return Number.isFinite(seconds) ? seconds : null;
}

/** The machine's count of OOM kills (/proc/vmstat `oom_kill`); null when unreadable. */
function machineOomKills(): number | null {
  try {
    return oomKillsOf(fs.readFileSync('/proc/vmstat', 'utf8'));
  } catch {
    return null;
  }
}

/** How the handler ended, as far as the OOM question goes. */
export interface Ending {
  /** It died of SIGKILL that the agent did not send. */
  sigkill: boolean;
}

/** A running measurement of one run. */
export interface Measurement {
  /** The handler has exited: takes the last disk sample and returns what was measured. `times` is the monitor's report, when there is one. */
  finish(times: string, ending: Ending): Promise<RunUsage>;
}

/** The run's cgroup, and whether its first process entered it (runner.ts's join wrapper says so). */
export interface RunCgroup {
  leaf: Leaf;
  joined: Promise<boolean>;
}

/** Starts measuring the process tree under `pid` (or the run's cgroup) and the directory `dir`. */
export function startMeasurement(pid: number | undefined, dir: string, cgroup: RunCgroup | null = null): Measurement {
  let peakMemory: number | null = null;
  let peakDisk: number | null = null;
  let treeTicks: number | null = null;
  let walking: Promise<void> | null = null;
  let diskFull: boolean | null = null;
  let statting = false;
  const oomBefore = cgroup ? cgroup.leaf.oomKills() : machineOomKills();

  const sampleFree = () => {
    if (statting) return;
    statting = true;
    fsp
      .statfs(dir)
      .then((st) => {
        diskFull = diskFull === true || st.bavail * st.bsize < DISK_FULL_BYTES;
      })
      .catch(() => {})
      .finally(() => (statting = false));
  };
  const sampleMemory = () => {
    sampleFree();
    if (pid === undefined) return;
    const found = tree(pid);
    if (found.size === 0) return;
    let rss = 0;
    let ticks = 0;
    for (const [p, entry] of found) {
      rss += residentBytes(p);
      ticks += entry.ticks;
    }
    peakMemory = Math.max(peakMemory ?? 0, rss);
    treeTicks = Math.max(treeTicks ?? 0, ticks);
  };
  const sampleDisk = () => {
    walking ??= diskUsage(dir)
      .then((bytes) => {
        if (bytes !== null) peakDisk = Math.max(peakDisk ?? 0, bytes);
      })
      .finally(() => (walking = null));
    return walking;
  };

  sampleMemory();
  const memoryTimer = setInterval(sampleMemory, MEMORY_SAMPLE_MS);
  const diskTimer = setInterval(() => void sampleDisk(), DISK_SAMPLE_MS);
  memoryTimer.unref();
  diskTimer.unref();

  return {
    async finish(times, ending) {
      clearInterval(memoryTimer);
      clearInterval(diskTimer);
      await walking;
      await sampleDisk();
      const reported = parseTimes(times);
      const sampled = treeTicks === null ? null : treeTicks / TICKS_PER_SECOND;
      const common = { cpuSeconds: reported ?? sampled, peakDiskBytes: peakDisk, diskFull };
      if (cgroup && (await cgroup.joined)) {
        const peak = cgroup.leaf.peakBytes();
        const after = cgroup.leaf.oomKills();
        if (peak !== null) {
          const outOfMemory = oomBefore === null || after === null ? null : after > oomBefore;
          return {
            ...common,
            peakMemoryBytes: peak,
            memoryMethod: cgroup.leaf.kind === 'v2' ? 'CGROUP_V2' : 'CGROUP_V1',
            outOfMemory,
            memoryLimitBytes: cgroup.leaf.limitBytes,
          };
        }
      }
      // The process tree: an OOM kill is the handler's SIGKILL while the machine counted one.
      const machineAfter = machineOomKills();
      const rose = oomBefore === null || machineAfter === null || cgroup ? null : machineAfter > oomBefore;
      const outOfMemory = rose === false ? false : rose === true && ending.sigkill ? true : null;
      return {
        ...common,
        peakMemoryBytes: peakMemory,
        memoryMethod: 'PROCESS_TREE',
        outOfMemory,
        memoryLimitBytes: null,
      };
    },
  };
}
