/**
 * Host commands the build runs: finding one (in PATH or the sbin directories) and running one
 * with its output handed on line by line, for the progress of long stages.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The path of an executable in PATH or in the sbin directories (not in a user's PATH), or null. */
export function findCommand(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), '/usr/sbin', '/sbin'];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}

/** Runs a command, handing each line of its output to `onLine`; rejects with its last lines when it fails. */
export function runStreaming(command: string, args: readonly string[], onLine: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const take = (stream: NodeJS.ReadableStream) => {
      let rest = '';
      stream.on('data', (d: Buffer) => {
        const lines = (rest + d.toString()).split(/\r?\n|\r/);
        rest = lines.pop() ?? '';
        for (const line of lines) {
          if (!line.trim()) continue;
          tail.push(line);
          if (tail.length > 30) tail.shift();
          onLine(line);
        }
      });
    };
    take(child.stdout!);
    take(child.stderr!);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${command} failed (${signal ?? `exit ${code}`}); its last lines:\n${tail.join('\n')}`));
    });
  });
}
