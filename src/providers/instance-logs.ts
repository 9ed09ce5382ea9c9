/**
 * Instance logs: where providers keep what an instance printed (a local agent's output, a virtual
 * machine's serial console), one file per instance, `<data dir>/instance-logs/<name>.log`. A provider
 * writes there from the start, so the log is readable while the instance runs and stays after its
 * own directory is deleted; a log nobody wrote to for TAGSCHED_INSTANCE_LOG_RETENTION_DAYS is deleted
 * by the server's housekeeping. Admins read them through the API (`Instance.log`).
 */
import fs from 'node:fs';
import path from 'node:path';

/** Instance names are worker names (letters, digits, `.`, `_`, `+`, `-`): file names as they are. */
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,149}$/;

/** The most of a log one read returns, in bytes. */
export const MAX_INSTANCE_LOG_READ_BYTES = 1024 * 1024;

/** The file of an instance's log. */
export function instanceLogPath(dir: string, name: string): string {
  if (!FILE_NAME.test(name)) throw new Error(`not an instance name: ${JSON.stringify(name.slice(0, 80))}`);
  return path.join(dir, `${name}.log`);
}

/** Creates the directory of instance logs (admins only: logs may hold what a job printed) and returns the log's path. */
export function prepareInstanceLog(dir: string, name: string): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return instanceLogPath(dir, name);
}

/** The end of an instance's log. */
export interface InstanceLogTail {
  /** The last bytes asked for, as UTF-8 (a character cut at the start is dropped). */
  readonly text: string;
  /** The whole log's size in bytes. */
  readonly bytes: number;
  /** Whether `text` is only the end of the log. */
  readonly truncated: boolean;
  readonly modifiedAt: Date;
}

/** The last `tailBytes` (at most MAX_INSTANCE_LOG_READ_BYTES) of an instance's log; null when there is none. */
export function readInstanceLog(dir: string, name: string, tailBytes: number): InstanceLogTail | null {
  if (!FILE_NAME.test(name)) return null;
  const want = Math.max(0, Math.min(MAX_INSTANCE_LOG_READ_BYTES, Math.floor(tailBytes)));
  let fd: number;
  try {
    fd = fs.openSync(instanceLogPath(dir, name), 'r');
  } catch {
    return null;
  }
  try {
    const stat = fs.fstatSync(fd);
    const length = Math.min(want, stat.size);
    const buffer = Buffer.alloc(length);
    let read = 0;
    while (read < length) {
      const n = fs.readSync(fd, buffer, read, length - read, stat.size - length + read);
      if (n === 0) break;
      read += n;
    }
    let text = buffer.subarray(0, read).toString('utf8');
    // A read that starts inside a multi-byte character begins with replacement characters: drop them.
    if (length < stat.size) text = text.replace(/^\uFFFD+/, '');
    return { text, bytes: stat.size, truncated: length < stat.size, modifiedAt: stat.mtime };
  } finally {
    fs.closeSync(fd);
  }
}

/** Deletes the logs not written to for `retentionMs`; returns how many. */
export function pruneInstanceLogs(dir: string, retentionMs: number, now: Date = new Date()): number {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return 0;
  }
  let pruned = 0;
  for (const file of names) {
    if (!file.endsWith('.log')) continue;
    const full = path.join(dir, file);
    try {
      if (now.getTime() - fs.statSync(full).mtimeMs >= retentionMs) {
        fs.rmSync(full, { force: true });
        pruned++;
      }
    } catch {
      // gone meanwhile
    }
  }
  return pruned;
}
