/**
 * A process's CPU time and resident memory read from /proc (Linux), for a server the bench did not
 * start: the same figures a forked server reports about itself with process.cpuUsage() (user +
 * system, every thread) and process.memoryUsage().rss.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second, the unit of /proc/PID/stat's times (`getconf CLK_TCK`; 100 when that fails). */
export function clockTicksPerSecond(): number {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
}

/**
 * utime + stime of a /proc/PID/stat line, in milliseconds. The fields are read after the last `)`,
 * which ends the command name (a name may hold spaces and parentheses): the state is the first of
 * them, utime the 12th and stime the 13th (fields 14 and 15 of proc(5)).
 */
export function cpuMsFromStat(stat: string, ticksPerSecond: number): number {
  const close = stat.lastIndexOf(')');
  if (close < 0) throw new Error(`not a /proc/PID/stat line: ${stat.slice(0, 100)}`);
  const fields = stat
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime))
    throw new Error(`no utime and stime in ${stat.slice(0, 100)}`);
  return ((utime + stime) * 1000) / ticksPerSecond;
}

/** VmRSS of a /proc/PID/status text, in bytes. */
export function rssBytesFromStatus(status: string): number {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
  if (!m) throw new Error('no VmRSS line in the status (a process that has exited?)');
  return Number(m[1]) * 1024;
}

/** Another process, read from /proc. */
export class ProcProcess {
  private readonly ticks = clockTicksPerSecond();
  constructor(readonly pid: number) {
    // Fails at once, not in the middle of a measure, when there is no such process.
    this.cpuMs();
  }

  /** Its CPU time so far (user + system), in milliseconds; whole clock ticks (10 ms at 100 Hz). */
  cpuMs(): number {
    return cpuMsFromStat(readFileSync(`/proc/${this.pid}/stat`, 'utf8'), this.ticks);
  }

  /** Its resident set now, in bytes (no GC is forced: it is not this process). */
  rssBytes(): number {
    return rssBytesFromStatus(readFileSync(`/proc/${this.pid}/status`, 'utf8'));
  }
}
