/**
 * The names of a process's built-in server workers (loops/server-tasks/server-workers.ts), in their one
 * home: `server-<process name>`, and `-N` when there are several, so that a process restarted under its
 * name (TAGSCHED_PROCESS_NAME) finds its workers again, and the registry finds the workers of a retired one.
 */
import { createHash } from 'node:crypto';

/** A worker name's longest length (the API's limit on names). */
const NAME_MAX = 100;
const PREFIX = 'server-';
/** What stands for the end of a process name too long to fit: a dash and 8 hex digits of its hash. */
const HASH_LENGTH = 9;

/**
 * `server-NAME` (and `-INDEX` when `count` is above 1), the process name's characters outside
 * `A-Za-z0-9._+-` made dashes (`host:4000` gives `server-host-4000`); a name that would be longer than
 * 100 characters keeps its beginning and ends with a hash of the whole process name, so that two long
 * names that begin alike still name different workers.
 */
export function serverWorkerName(processName: string, index: number, count: number): string {
  const suffix = count > 1 ? `-${index}` : '';
  const clean = processName.replace(/[^A-Za-z0-9._+-]/g, '-') || 'process';
  const room = NAME_MAX - PREFIX.length - suffix.length;
  const fitted =
    clean.length <= room
      ? clean
      : `${clean.slice(0, room - HASH_LENGTH)}-${createHash('sha256')
          .update(processName)
          .digest('hex')
          .slice(0, HASH_LENGTH - 1)}`;
  return `${PREFIX}${fitted}${suffix}`;
}

/** Whether `workerName` is one of the server worker names of the process `processName` (whatever their count). */
export function isServerWorkerOf(workerName: string, processName: string): boolean {
  if (workerName === serverWorkerName(processName, 1, 1)) return true;
  const index = /-([1-9][0-9]*)$/.exec(workerName)?.[1];
  return index !== undefined && workerName === serverWorkerName(processName, Number(index), Number(index) + 1);
}
