import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { spawnSync } from 'node:child_process';
import { planMemoryCgroup } from '../../src/agent/cgroup.js';
import { cgroupLeafName, resultOf, runDirName, startRun, type Outcome, type RunSpec } from '../../src/agent/runner.js';
import { expectedMemoryMethod } from './memory-cgroup.js';

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
    const run = startRun(
      spec(
        '7',
        'cat > task.json; echo "id=$TAGSCHED_WORK_REQUEST_ID name=$TAGSCHED_TASK_NAME j=$TAGSCHED_PARALLEL pwd=$(pwd)"; echo oops >&2',
      ),
    );
    expect(await run.done).toEqual({ kind: 'exit', code: 0 });
    expect(run.dir).toBe(path.join(runsDir, '7'));
    expect(JSON.parse(fs.readFileSync(path.join(run.dir, 'task.json'), 'utf8'))).toEqual({
      id: '7',
      taskType: 'worker',
      taskName: 'noop',
      taskData: { n: 1 },
    });
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
      await vi.waitFor(() => expect(fs.existsSync(path.join(dir, 'w', 'started'))).toBe(true), {
        timeout: 15_000,
        interval: 20,
      });
      agent.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, 1500));
      expect(fs.existsSync(path.join(dir, 'w', 'late'))).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a run in its own memory cgroup', () => {
  const expected = expectedMemoryMethod();
  const task = (id: string) => ({ id, taskType: 'worker', taskName: 'noop', taskData: {} });

  it.runIf(expected !== 'PROCESS_TREE')(
    'is measured by its cgroup, and what it left running in the background ends with it',
    async () => {
      const plan = planMemoryCgroup('auto');
      expect(plan.kind).toBe(expected === 'CGROUP_V2' ? 'v2' : 'v1');
      if (plan.kind === 'none') return;
      const runsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-cgroup-run-'));
      try {
        // A daemon in a session of its own: out of the handler's process group, still in its cgroup.
        const run = startRun({
          task: task('daemon $(touch pwned)'),
          command: `setsid sh -c 'echo $$ > daemon.pid; exec sleep 60' & sleep 0.3; cat /proc/self/cgroup > cgroup.txt`,
          runsDir,
          parallel: 1,
          env: { PATH: process.env.PATH },
          memoryCgroup: plan,
        });
        expect(await run.done).toEqual({ kind: 'exit', code: 0 });
        const usage = await run.usage;
        expect(usage?.memoryMethod).toBe(expected);
        expect(usage?.outOfMemory).toBe(false);
        const leafName = cgroupLeafName('daemon $(touch pwned)');
        expect(leafName).toMatch(/^tagsched-run-\d+-daemon_/);
        expect(fs.readFileSync(path.join(run.dir, 'cgroup.txt'), 'utf8')).toContain(`/${leafName}\n`);
        const daemon = Number(fs.readFileSync(path.join(run.dir, 'daemon.pid'), 'utf8'));
        // Killed: gone, or a zombie until its new parent reaps it.
        const state = () => {
          try {
            return fs.readFileSync(`/proc/${daemon}/stat`, 'utf8').split(') ')[1]?.[0];
          } catch {
            return 'gone';
          }
        };
        expect(['gone', 'Z']).toContain(state());
        expect(fs.existsSync(path.join(plan.parent, leafName))).toBe(false);
        expect(fs.existsSync(path.join(run.dir, 'pwned'))).toBe(false);
      } finally {
        fs.rmSync(runsDir, { recursive: true, force: true });
      }
    },
  );
});

describe('the leaves of agents that are gone', () => {
  it.runIf(expectedMemoryMethod() !== 'PROCESS_TREE')(
    'are removed when an agent starts, those of live agents are not',
    () => {
      const first = planMemoryCgroup('auto');
      if (first.kind === 'none') throw new Error(first.why);
      // No process has a pid above the kernel's largest (4194304).
      const gone = path.join(first.parent, 'tagsched-run-4194305-7');
      const alive = path.join(first.parent, `tagsched-run-${process.ppid}-7`);
      fs.mkdirSync(gone);
      fs.mkdirSync(alive);
      try {
        expect(planMemoryCgroup('auto')).toEqual(first);
        expect(fs.existsSync(gone)).toBe(false);
        expect(fs.existsSync(alive)).toBe(true);
      } finally {
        for (const dir of [gone, alive]) if (fs.existsSync(dir)) fs.rmdirSync(dir);
      }
    },
  );
});

describe('a run whose file system fills up', () => {
  const isRoot = process.getuid?.() === 0;
  it.runIf(isRoot)('says diskFull (its directory on a 4 MiB tmpfs); a run that leaves room does not', async () => {
    const runsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-full-'));
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tagsched-test', runsDir]);
    expect(mounted.status, mounted.stderr?.toString()).toBe(0);
    try {
      const spec = (id: string, command: string): RunSpec => ({
        task: { id, taskType: 'worker', taskName: 'noop', taskData: {} },
        command,
        runsDir,
        parallel: 1,
        env: { PATH: process.env.PATH },
      });
      const full = startRun(spec('full', 'dd if=/dev/zero of=fill bs=1M count=8 status=none; sleep 0.5; rm fill'));
      expect(await full.done).toEqual({ kind: 'exit', code: 0 });
      expect((await full.usage)?.diskFull).toBe(true);
      const roomy = startRun(spec('roomy', 'dd if=/dev/zero of=some bs=1M count=1 status=none; sleep 0.5'));
      expect(await roomy.done).toEqual({ kind: 'exit', code: 0 });
      expect((await roomy.usage)?.diskFull).toBe(false);
    } finally {
      // Lazily: a handler's watchdog shell may still be leaving the directory.
      spawnSync('umount', ['--lazy', runsDir]);
      fs.rmSync(runsDir, { recursive: true, force: true });
    }
  });
});
