import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { resultOf, runDirName, startRun, type Outcome, type RunSpec } from '../../src/agent/runner.js';

describe('resultOf', () => {
  it.each<[string, Outcome, string]>([
    ['exit 0', { kind: 'exit', code: 0 }, 'SUCCESS'],
    ['exit 1', { kind: 'exit', code: 1 }, 'FAILURE'],
    ['exit 2', { kind: 'exit', code: 2 }, 'ERROR'],
    ['exit 127 (command not found)', { kind: 'exit', code: 127 }, 'ERROR'],
    ['exit 255', { kind: 'exit', code: 255 }, 'ERROR'],
    ['a signal', { kind: 'signal', signal: 'SIGKILL' }, 'ERROR'],
    ['a handler that never started', { kind: 'not-started', error: 'EACCES' }, 'ERROR'],
  ])('%s → %s', (_name, outcome, result) => {
    expect(resultOf(outcome)).toBe(result);
  });
});

describe('runDirName', () => {
  it.each([
    ['42', '42'],
    ['a1b2-c3_d4', 'a1b2-c3_d4'],
  ])('keeps a plain id %s', (id, expected) => {
    expect(runDirName(id)).toBe(expected);
  });

  it.each(['../../etc', 'a/b', '.', '..', 'x y'])('never turns %j into a path', (id) => {
    const name = runDirName(id);
    expect(name).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(name).not.toBe(runDirName(`${id}!`));
  });
});

describe('startRun', () => {
  let runsDir: string;
  beforeAll(() => {
    runsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-runner-'));
  });
  afterAll(() => fs.rmSync(runsDir, { recursive: true, force: true }));

  const spec = (id: string, command: string, env: NodeJS.ProcessEnv = {}): RunSpec => ({
    task: { id, taskType: 'worker', taskName: 'noop', taskData: { n: 1 } },
    command,
    runsDir,
    parallel: 3,
    env: { PATH: process.env.PATH, ...env },
  });

  it('gives the handler its task on stdin, its variables, its own directory, and a log file', async () => {
    const run = startRun(spec('7', 'cat > task.json; echo "id=$TAGSCHED_WORK_REQUEST_ID name=$TAGSCHED_TASK_NAME j=$TAGSCHED_PARALLEL pwd=$(pwd)"; echo oops >&2'));
    expect(await run.done).toEqual({ kind: 'exit', code: 0 });
    expect(run.dir).toBe(path.join(runsDir, '7'));
    expect(JSON.parse(fs.readFileSync(path.join(run.dir, 'task.json'), 'utf8'))).toEqual({ id: '7', taskType: 'worker', taskName: 'noop', taskData: { n: 1 } });
    const log = fs.readFileSync(run.logFile, 'utf8');
    expect(log).toContain(`id=7 name=noop j=3 pwd=${fs.realpathSync(run.dir)}`);
    expect(log).toContain('oops');
  });

  it('hides the agent’s tokens from the handler', async () => {
    const run = startRun(
      spec('tokens', 'echo "w=${TAGSCHED_WORKER_TOKEN:-none} a=${TAGSCHED_ACTIVATION_TOKEN:-none} other=$OTHER"', {
        TAGSCHED_WORKER_TOKEN: 'secret',
        TAGSCHED_ACTIVATION_TOKEN: 'secret2',
        OTHER: 'kept',
      }),
    );
    await run.done;
    expect(fs.readFileSync(run.logFile, 'utf8').trim()).toBe('w=none a=none other=kept');
  });

  it('starts in a fresh directory', async () => {
    await startRun(spec('again', 'touch leftover')).done;
    const run = startRun(spec('again', 'ls'));
    await run.done;
    expect(fs.readFileSync(run.logFile, 'utf8')).not.toContain('leftover');
  });

  it.each<[string, string, string, Outcome]>([
    ['exit 1', 'e1', 'exit 1', { kind: 'exit', code: 1 }],
    ['exit 3', 'e3', 'exit 3', { kind: 'exit', code: 3 }],
    ['a missing command', 'e127', 'no-such-command-tagsched', { kind: 'exit', code: 127 }],
    ['a handler that does not read stdin', 'e0', 'exit 0', { kind: 'exit', code: 0 }],
    ['a handler that waits for its background jobs', 'ew', 'sleep 0.1 & wait; exit 4', { kind: 'exit', code: 4 }],
  ])('reports %s', async (_name, id, command, outcome) => {
    expect(await startRun(spec(id, command)).done).toEqual(outcome);
  });

  it('kills the handler and its children as a group', async () => {
    const run = startRun(spec('killed', 'sleep 30 & sleep 30; wait'));
    await new Promise((r) => setTimeout(r, 100));
    run.kill('SIGTERM');
    expect(await run.done).toEqual({ kind: 'signal', signal: 'SIGTERM' });
  });

  it('reports a run whose directory cannot be made as not started', async () => {
    const file = path.join(runsDir, 'a-file');
    fs.writeFileSync(file, '');
    const run = startRun({ ...spec('x', 'true'), runsDir: file });
    expect(run.pid).toBeUndefined();
    expect((await run.done).kind).toBe('not-started');
  });
});

describe('a handler whose agent dies', () => {
  it('is ended with the agent (SIGKILL leaves no build running unreported)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-orphan-'));
    try {
      const script = path.join(dir, 'agent.ts');
      const runner = path.resolve('src/agent/runner.ts');
      fs.writeFileSync(
        script,
        `import { startRun } from ${JSON.stringify(runner)};
const run = startRun({ task: { id: 'o', taskType: 'worker', taskName: 'noop', taskData: {} }, command: 'echo started > ../../started; sleep 1; echo late > ../../late',
  runsDir: ${JSON.stringify(path.join(dir, 'w', 'runs'))}, parallel: 1, env: { PATH: process.env.PATH } });
setInterval(() => {}, 1000);
`,
      );
      const { spawn } = await import('node:child_process');
      const agent = spawn(process.execPath, ['--import', 'tsx', script], { stdio: 'ignore' });
      await vi.waitFor(() => expect(fs.existsSync(path.join(dir, 'w', 'started'))).toBe(true), { timeout: 15_000, interval: 20 });
      agent.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, 1500));
      expect(fs.existsSync(path.join(dir, 'w', 'late'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
