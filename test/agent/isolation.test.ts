import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { settled, until, useFleet, type LogLine } from '../faults/harness.js';
import { expectedMemoryMethod } from './memory-cgroup.js';

// Handlers cannot act as their worker: the real agent (bin/tagsched-worker.js) runs a handler that
// tries every way to its worker's token this test knows of, and prints whatever looks like a token.
// Run unprotected (--handler-isolation none), the same handler finds it: the probe works.
const f = useFleet();
const AGENT_BIN = path.resolve('bin/tagsched-worker.js');
const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;
const TEST_TIMEOUT_MS = 180_000;
/** Whether a run gets its own memory cgroup here (statistics.test.ts proves the measurement). */
const MEMORY_METHOD = expectedMemoryMethod();

// A token is tsk_ and many more characters; the probe's own grep, whose pattern it reads in
// /proc/*/cmdline while that grep runs, shows "tsk_" followed by "[": not a token.
const PROBE = `#!/bin/sh
found() { grep -a -o -h -E 'tsk_[A-Za-z0-9_-]{8,}' | sort -u | sed "s|^|FOUND $1 |"; }
echo "probe uid=$(id -u) pwd=$(pwd)"
cat ../../state.json 2>/dev/null | found state-relative
cat "$PROBE_STATE" 2>/dev/null | found state-absolute
grep -r -a -o -h -E 'tsk_[A-Za-z0-9_-]{8,}' ../.. 2>/dev/null | found work-dir
env | found environment
cat /proc/$PPID/environ /proc/$PPID/cmdline 2>/dev/null | found parent
for p in /proc/[0-9]*; do timeout 2 cat $p/environ $p/cmdline 2>/dev/null; done | found any-process
for d in /proc/self/fd/*; do [ -f "$d" ] && cat "$d"; done 2>/dev/null | found descriptors
umount "$(dirname "$PROBE_STATE")" 2>/dev/null && echo "UNMOUNTED"
cat "$PROBE_STATE" 2>/dev/null | found state-after-umount
cg=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
if [ -n "$cg" ]; then d=/sys/fs/cgroup/memory$cg; else d=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); [ -d /sys/fs/cgroup/unified ] && d=/sys/fs/cgroup/unified$(sed -n 's/^0:://p' /proc/self/cgroup); fi
echo "probe cgroup $d"
[ -f "$d/memory.max_usage_in_bytes" ] && (echo 0 > "$d/memory.max_usage_in_bytes") 2>/dev/null && echo "CGROUP-WRITTEN peak"
[ -f "$d/memory.limit_in_bytes" ] && (echo -1 > "$d/memory.limit_in_bytes") 2>/dev/null && echo "CGROUP-WRITTEN limit"
[ -f "$d/memory.max" ] && (echo max > "$d/memory.max") 2>/dev/null && echo "CGROUP-WRITTEN limit"
(echo $$ > "$d/../cgroup.procs") 2>/dev/null && echo "CGROUP-LEFT"
echo "probe done"
`;

interface Started {
  logs: LogLine[];
  output: () => string;
  stop(): Promise<void>;
}

const running: Started[] = [];
afterEach(async () => {
  for (const a of running.splice(0)) await a.stop();
});

/** Starts the real agent with a state file and the variable holding its token, the probe as its noop handler. */
async function startAgent(
  url: string,
  name: string,
  options: { asNobody?: boolean; args?: string[] } = {},
): Promise<{ token: string; workDir: string; agent: Started }> {
  const token = await f.registerWorker(url, name);
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-isolation-'));
  fs.chmodSync(base, 0o755);
  const probe = path.join(base, 'probe.sh');
  fs.writeFileSync(probe, PROBE, { mode: 0o755 });
  const workDir = path.join(base, 'work');
  fs.mkdirSync(workDir);
  const stateFile = path.join(workDir, 'state.json');
  fs.writeFileSync(stateFile, JSON.stringify({ workerToken: token, workerName: name, server: url }), { mode: 0o600 });
  if (options.asNobody) {
    fs.chownSync(workDir, NOBODY, NOBODY);
    fs.chownSync(stateFile, NOBODY, NOBODY);
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('TAGSCHED_') && !k.startsWith('npm_')) env[k] = v;
  Object.assign(env, {
    TAGSCHED_WORKER_TOKEN: token,
    TAGSCHED_HEARTBEAT_INTERVAL: '1',
    TAGSCHED_MAX_BACKOFF: '0.5',
    TAGSCHED_LOG_LEVEL: 'debug',
    PROBE_STATE: stateFile,
  });
  const agentArgs = [
    AGENT_BIN,
    '--server',
    url,
    '--work-dir',
    workDir,
    '--handler',
    `noop=sh ${probe}`,
    ...(options.args ?? []),
  ];
  const child = options.asNobody
    ? spawn(
        'setpriv',
        [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', process.execPath, ...agentArgs],
        {
          env: { ...env, HOME: base },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
    : spawn(process.execPath, agentArgs, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const logs: LogLine[] = [];
  child.stdout.on('data', (d: Buffer) => {
    output += d.toString();
    logs.splice(
      0,
      logs.length,
      ...output.split('\n').flatMap((l) => (l.startsWith('{') ? [JSON.parse(l) as LogLine] : [])),
    );
  });
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const agent: Started = {
    logs,
    output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      fs.rmSync(base, { recursive: true, force: true });
    },
  };
  running.push(agent);
  await until(
    () => `the agent to report its metadata:\n${output}`,
    () => logs.some((l) => l.msg === 'metadata reported') || child.exitCode !== null,
    60_000,
    50,
  );
  expect(child.exitCode, output).toBeNull();
  return { token, workDir, agent };
}

/** Submits a noop (the probe), waits for its end, and returns what the probe wrote. */
async function probeOnce(url: string, workDir: string): Promise<string> {
  const r = await f.gql(
    url,
    `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
  );
  const id = r.data!.createWorkRequest.id as string;
  const [state] = await settled(f, [id]);
  expect(state).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS' });
  return fs.readFileSync(path.join(workDir, 'runs', id, 'log'), 'utf8');
}

describe('a handler that tries to read its worker’s token', () => {
  it.runIf(isRoot)(
    'fails when the agent runs as root with --handler-user: another user, the state file hidden, the agent not in its /proc',
    async () => {
      const server = await f.server();
      const { url } = server;
      try {
        const { token, workDir, agent } = await startAgent(url, 'iso-root', { args: ['--handler-user', 'nobody'] });
        expect(agent.logs.find((l) => l.msg === 'handlers are kept from the worker token')).toMatchObject({
          isolation: 'user',
          handlerUser: 'nobody',
          namespaces: true,
        });
        const log = await probeOnce(url, workDir);
        expect(log).toContain(`probe uid=${NOBODY}`);
        expect(log).toContain('probe done');
        expect(log).not.toContain('FOUND');
        expect(log).not.toContain('UNMOUNTED');
        expect(log).not.toContain(token);
        // The run has its own memory cgroup, made by the agent as root: the handler user can neither
        // reset its peak, lift its limit nor leave it.
        const measured = await until(
          () => `the agent to log "run measured":\n${agent.output()}`,
          () => agent.logs.find((l) => l.msg === 'run measured'),
        );
        expect(measured).toMatchObject({ memoryMethod: MEMORY_METHOD });
        if (MEMORY_METHOD !== 'PROCESS_TREE')
          expect(log).toMatch(/^probe cgroup \/sys\/fs\/cgroup\/.*\/tagsched-run-[^/\n]+$/m);
        expect(log).not.toContain('CGROUP-WRITTEN');
        expect(log).not.toContain('CGROUP-LEFT');
      } finally {
        await server.stop();
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'fails when the agent is not root: user, mount and PID namespaces',
    async () => {
      const server = await f.server();
      const { url } = server;
      try {
        const { token, workDir, agent } = await startAgent(url, 'iso-user', { asNobody: isRoot });
        expect(
          agent.logs.find((l) => l.msg === 'handlers are kept from the worker token'),
          agent.output(),
        ).toMatchObject({ isolation: 'namespace' });
        const log = await probeOnce(url, workDir);
        expect(log).toContain('probe done');
        expect(log).not.toContain('FOUND');
        expect(log).not.toContain('UNMOUNTED');
        expect(log).not.toContain(token);
      } finally {
        await server.stop();
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'succeeds when isolation is turned off, and the agent says so loudly at start',
    async () => {
      const server = await f.server();
      const { url } = server;
      try {
        const { token, workDir, agent } = await startAgent(url, 'iso-none', { args: ['--handler-isolation', 'none'] });
        expect(
          agent.logs.find(
            (l) => l.msg === 'HANDLERS ARE NOT ISOLATED: a handler can read the worker token and act as this worker',
          ),
        ).toMatchObject({
          level: 40,
          isolation: 'none',
        });
        const log = await probeOnce(url, workDir);
        // The environment is never a way: the agent removes its tokens from what handlers inherit.
        expect(log).not.toContain('FOUND environment');
        expect(log).toContain(`FOUND state-relative ${token}`);
        expect(log).toContain(`FOUND state-absolute ${token}`);
        expect(log).toContain(`FOUND any-process ${token}`); // the agent's environment, in /proc
        // A handler run as root could rewrite its cgroup: the probe of the --handler-user test works.
        if (isRoot && MEMORY_METHOD !== 'PROCESS_TREE') {
          expect(log).toMatch(/^probe cgroup \/sys\/fs\/cgroup\/.*\/tagsched-run-[^/\n]+$/m);
          expect(log).toContain('CGROUP-WRITTEN peak');
          expect(log).toContain('CGROUP-LEFT');
        }
      } finally {
        await server.stop();
      }
    },
    TEST_TIMEOUT_MS,
  );
});
