/**
 * Everything the cluster suite starts is recorded here, so that it is ended even when the suite fails or
 * its process is told to stop: process groups (each child is started in a group of its own), the
 * PostgreSQL data directories Patroni started a postmaster in (the postmaster leaves Patroni's group), and
 * the temporary directories. `reapAll` is synchronous: it also runs from the process's `exit` handler.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';

const groups = new Set<number>();
const dataDirs = new Map<string, { uid: number; gid: number }>();
const dirs = new Set<string>();
let hooked = false;

/** Ends a process group with SIGKILL (a stopped one too); a group that is gone is fine. */
export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** The postmaster's pid of a data directory, from its postmaster.pid; null when there is none. */
export function postmasterPid(dataDir: string): number | null {
  try {
    const pid = Number(fs.readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Records a child started with `detached: true` (its pid is its group's id). */
export function trackGroup(pgid: number): void {
  hook();
  groups.add(pgid);
}

/** Forgets a group that ended by itself. */
export function untrackGroup(pgid: number): void {
  groups.delete(pgid);
}

/** Records a data directory whose postmaster must be stopped at the end, and who owns it. */
export function trackDataDir(dir: string, owner: { uid: number; gid: number }): void {
  hook();
  dataDirs.set(dir, owner);
}

/** Records a directory to remove at the end. */
export function trackDir(dir: string): void {
  hook();
  dirs.add(dir);
}

/** Ends every recorded process group and postmaster, and removes the recorded directories. */
export function reapAll(options: { keepDirs?: boolean } = {}): void {
  for (const g of groups) killGroup(g);
  groups.clear();
  for (const [dir, owner] of dataDirs) {
    const pid = postmasterPid(dir);
    if (pid === null) continue;
    // An immediate stop ends the postmaster and its backends, and removes its shared memory.
    spawnSync('/usr/lib/postgresql/15/bin/pg_ctl', ['-D', dir, 'stop', '-m', 'immediate', '-w', '-t', '10'], {
      uid: owner.uid,
      gid: owner.gid,
      stdio: 'ignore',
      timeout: 15_000,
    });
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // stopped
    }
  }
  dataDirs.clear();
  if (!options.keepDirs) for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  dirs.clear();
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
// Vitest's workers refuse process.exit: once everything is ended, the process ends itself the hard way.
const onSignal = () => {
  reapAll();
  process.kill(process.pid, 'SIGKILL');
};
const onExit = () => reapAll();

function hook(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', onExit);
  for (const signal of SIGNALS) process.on(signal, onSignal);
}

/** Ends everything recorded and removes the exit and signal handlers (the suite's afterAll). */
export function release(options: { keepDirs?: boolean } = {}): void {
  reapAll(options);
  if (!hooked) return;
  hooked = false;
  process.off('exit', onExit);
  for (const signal of SIGNALS) process.off(signal, onSignal);
}
