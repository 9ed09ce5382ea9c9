/**
 * What the client phase reads and writes for a server it did not start (bench/proc.ts,
 * bench/queue-copy.ts): CPU time and RSS parsed from /proc texts, and the statement that copies one
 * work request into the pending queue.
 */
import { describe, expect, it } from 'vitest';
import { cpuMsFromStat, ProcProcess, rssBytesFromStatus } from '../../bench/proc.js';
import { copyStatement, quoteIdent } from '../../bench/queue-copy.js';

describe('/proc', () => {
  it('reads utime + stime after the command name, even one with spaces and parentheses', () => {
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
    const stat = '4242 (node (tsx) x) S 1 4242 4242 0 -1 4194560 12345 0 7 0 250 31 5 9 20 0 11 0 1000 123456789 40000';
    expect(cpuMsFromStat(stat, 100)).toBe(2810);
    expect(cpuMsFromStat(stat, 1000)).toBe(281);
    expect(() => cpuMsFromStat('garbage', 100)).toThrow(/not a \/proc/);
  });

  it('reads VmRSS in bytes', () => {
    expect(rssBytesFromStatus('Name:\tnode\nVmPeak:\t 999 kB\nVmRSS:\t  265432 kB\nRssAnon:\t 1 kB\n')).toBe(
      265432 * 1024,
    );
    expect(() => rssBytesFromStatus('Name:\tzombie\n')).toThrow(/VmRSS/);
  });

  it.skipIf(process.platform !== 'linux')('reads this process as process.cpuUsage() and memoryUsage() see it', () => {
    const me = new ProcProcess(process.pid);
    const { user, system } = process.cpuUsage();
    // /proc counts whole clock ticks: within a few of them.
    expect(Math.abs(me.cpuMs() - (user + system) / 1000)).toBeLessThan(100);
    expect(me.rssBytes() / process.memoryUsage().rss).toBeGreaterThan(0.8);
    expect(me.rssBytes() / process.memoryUsage().rss).toBeLessThan(1.25);
  });
});

describe('copyStatement', () => {
  it('copies every named column from the original, as many times as asked, into new ids', () => {
    expect(copyStatement(['workspace_id', 'class_id', 'status'])).toBe(
      'insert into work_request ("workspace_id", "class_id", "status") select o."workspace_id", o."class_id", o."status" from work_request o cross join generate_series(1, $2::int) where o.id = $1',
    );
  });

  it('refuses to copy the id, or nothing', () => {
    expect(() => copyStatement(['id', 'status'])).toThrow(/id/);
    expect(() => copyStatement([])).toThrow(/no columns/);
  });

  it('quotes identifiers', () => {
    expect(quoteIdent('a"b')).toBe('"a""b"');
  });
});
