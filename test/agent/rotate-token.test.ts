import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADMIN, settled, useFleet, type LogLine } from '../faults/harness.js';

// `tagsched-worker --rotate-token`: the real agent trades its worker token for a new one through the
// server's rotateToken, keeps it in its state file, and the next start runs as the same worker.
const f = useFleet();
const AGENT_BIN = path.resolve('bin/tagsched-worker.js');

/** Runs the agent once to its end; its exit code, its JSON log lines and its raw output. */
function runAgent(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; logs: LogLine[]; output: string }> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('TAGSCHED_') && !k.startsWith('npm_')) clean[k] = v;
  const child = spawn(process.execPath, [AGENT_BIN, ...args], {
    env: { ...clean, TAGSCHED_MAX_BACKOFF: '0.5', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  return new Promise((resolve) =>
    child.once('close', (code) => {
      const logs = output.split('\n').flatMap((l) => {
        try {
          return [JSON.parse(l) as LogLine];
        } catch {
          return [];
        }
      });
      resolve({ code, logs, output });
    }),
  );
}

const readState = (file: string) =>
  JSON.parse(fs.readFileSync(file, 'utf8')) as { workerToken: string; workerName: string; server: string };
const accepted = async (url: string, token: string) =>
  (await f.gql(url, '{ tokens { id } }', {}, token)).status === 200;

describe('tagsched-worker --rotate-token', () => {
  it('rotates the token given, then the one in the state file; the old ones are refused, and the agent runs as the same worker', async () => {
    const server = await f.server();
    try {
      const original = await f.registerWorker(server.url, 'rot-1');
      const workDir = path.join(f.dir, 'rot-1');
      const stateFile = path.join(workDir, 'state.json');

      const first = await runAgent(['--rotate-token', '--server', server.url, '--work-dir', workDir], {
        TAGSCHED_WORKER_TOKEN: original,
      });
      expect(first.code, first.output).toBe(0);
      expect(first.logs.map((l) => l.msg)).toContain(
        'token rotated: the new one is in the state file, the old one is revoked',
      );
      expect(first.logs.some((l) => l.level === 40 && /--token/.test(String(l.msg)))).toBe(true); // the variable's token is dead now
      const afterFirst = readState(stateFile);
      expect(afterFirst).toMatchObject({ workerName: 'rot-1', server: server.url });
      expect(afterFirst.workerToken).not.toBe(original);
      expect(fs.statSync(stateFile).mode & 0o777).toBe(0o600);
      expect(first.output).not.toContain(afterFirst.workerToken);
      expect(first.output).not.toContain(original);
      expect(await accepted(server.url, original)).toBe(false);
      expect(await accepted(server.url, afterFirst.workerToken)).toBe(true);

      // Again, from the state file this time.
      const second = await runAgent(['--rotate-token', '--server', server.url, '--work-dir', workDir]);
      expect(second.code, second.output).toBe(0);
      const afterSecond = readState(stateFile);
      expect(afterSecond.workerToken).not.toBe(afterFirst.workerToken);
      expect(await accepted(server.url, afterFirst.workerToken)).toBe(false);

      // The revoked token cannot rotate again: exit 2, the state file untouched.
      const refused = await runAgent(
        ['--rotate-token', '--server', server.url, '--work-dir', path.join(f.dir, 'elsewhere')],
        { TAGSCHED_WORKER_TOKEN: afterFirst.workerToken },
      );
      expect(refused.code, refused.output).toBe(2);
      expect(readState(stateFile)).toEqual(afterSecond);

      // The worker keeps its identity: its agent, on the new token, runs work as rot-1.
      const agent = await f.agent({ name: 'rot-1', url: server.url, token: afterSecond.workerToken });
      const id = await f.createNoop(server.url);
      expect((await settled(f, [id]))[0]).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS', worker: 'rot-1' });
      const tokens = await f.gql(server.url, '{ tokens(worker: "rot-1") { valid } }', {}, ADMIN);
      expect(tokens.data!.tokens.map((t: { valid: boolean }) => t.valid)).toEqual([true, false, false]);
      agent.signal('SIGTERM');
      expect(await agent.exited).toBe(0);
    } finally {
      await server.stop();
    }
  }, 120_000);

  it('exits 64 when there is no worker token to rotate', async () => {
    const r = await runAgent([
      '--rotate-token',
      '--server',
      'http://127.0.0.1:9/graphql',
      '--work-dir',
      path.join(f.dir, 'none'),
    ]);
    expect(r.code, r.output).toBe(64);
    expect(r.logs.find((l) => l.msg === 'cannot start')?.reason).toMatch(/no worker token/);
  });
});
