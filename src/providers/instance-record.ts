/**
 * The file a provider that starts processes on the server's host keeps beside each instance
 * (`instance.json` in the instance's directory: the local provider's agents, the qemu provider's
 * machines), read back by `list` so that every server process sharing the data directory sees the
 * same instances. Written whole to a temporary file and renamed, so a reader never sees half of it.
 */
import fs from 'node:fs';
import path from 'node:path';

const FILE = 'instance.json';

/** The record in `dir`, or null when there is none (not written yet, removed, or unreadable). */
export function readInstanceRecord<T>(dir: string): T | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, FILE), 'utf8')) as T;
  } catch {
    return null;
  }
}

/** Writes the record in `dir` (mode 0600: it names processes and paths of the server's host). */
export function writeInstanceRecord(dir: string, record: object): void {
  const file = path.join(dir, FILE);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(record), { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}

/** The names of a pool's instance directories under `root` (`root/POOL/NAME`); none when the pool has no directory. */
export function instanceNames(root: string, pool: string): string[] {
  try {
    return fs.readdirSync(path.join(root, pool));
  } catch {
    return [];
  }
}
