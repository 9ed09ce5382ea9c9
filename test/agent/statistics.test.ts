import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../cli/admin/harness.js';
import { ADMIN, settled, until, useFleet } from '../faults/harness.js';
import { expectedMemoryMethod } from './memory-cgroup.js';

// What a run used: the real agent (bin/tagsched-worker.js) measures a real handler that holds
// 300 MiB of memory and writes 200 MiB into its directory, reports it with the result, and the
// server keeps it (WorkRequest.statistics) and counts it in /metrics. Where this process may make
// a memory cgroup under its own (the agents are its children, in the same cgroups), the agent
// measures the run's own cgroup.
const f = useFleet();
const MIB = 2 ** 20;

const EXPECTED = expectedMemoryMethod();
const LABELS = { PROCESS_TREE: 'process tree', CGROUP_V2: 'cgroup v2', CGROUP_V1: 'cgroup v1' } as const;

/** Python holds 300 MiB of written bytes (every page touched) for 1.5 s. */
const ALLOCATE = `/usr/bin/python3 -c 'import time; b = bytearray(b"\\x01") * (300 * 2**20); time.sleep(1.5)'`;

// Python holds 300 MiB of written bytes (bytearray of ones: every page touched) for 1.5 s; then
// dd writes 200 MiB of data into the run's directory, which stays there until the end.
const ALLOCATE_AND_WRITE = [ALLOCATE, 'dd if=/dev/zero of=big bs=1M count=200 conv=fsync status=none'].join('; ');

const STATISTICS =
  'statistics { setupSeconds runSeconds teardownSeconds cpuSeconds peakMemoryBytes peakDiskBytes cpuCount memoryMethod recordedAt }';

describe('what a run used', () => {
  it('is measured by the agent on a real handler (300 MiB held, 200 MiB written: within 10 %), kept with the request and counted in /metrics', async () => {
    const server = await f.server();
    try {
      // A noop whose taskData says {"result": false} fails: its completion takes the full path (a transaction with the row locked).
      const agent = await f.agent({
        name: 'stats-1',
        url: server.url,
        output: ALLOCATE_AND_WRITE,
        sleep: '0',
        env: { FAULT_FAIL_MATCH: 'noop:*"result":false*' },
      });
      const id = await f.createNoop(server.url);
      expect((await settled(f, [id]))[0]).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS' });

      const r = await f.gql(server.url, `query($id: ID!) { workRequest(id: $id) { ${STATISTICS} } }`, { id });
      const s = r.data?.workRequest?.statistics;
      expect(s, JSON.stringify(r)).toBeTruthy();
      expect(s.peakMemoryBytes / MIB).toBeGreaterThan(300 * 0.9);
      expect(s.peakMemoryBytes / MIB).toBeLessThan(300 * 1.1);
      expect(s.peakDiskBytes / MIB).toBeGreaterThan(200 * 0.9);
      expect(s.peakDiskBytes / MIB).toBeLessThan(200 * 1.1);
      expect(s.runSeconds).toBeGreaterThan(1.5);
      expect(s.cpuSeconds).toBeGreaterThan(0);
      expect(s.cpuSeconds).toBeLessThan(s.runSeconds * s.cpuCount);
      expect(s.setupSeconds).toBeGreaterThanOrEqual(0);
      expect(s.teardownSeconds).toBeGreaterThanOrEqual(0);
      expect(s.cpuCount).toBeGreaterThanOrEqual(1);
      expect(s.memoryMethod).toBe(EXPECTED);
      // The agent says how it measures at start; the run's own figures are in its log, with the two
      // the server does not take yet: nothing ran out of memory or disk.
      expect(agent.logged('how peak memory is measured')[0]).toMatchObject({ memoryMethod: EXPECTED });
      const measured = agent.logged('run measured')[0];
      expect(measured).toMatchObject({ id, memoryMethod: EXPECTED, diskFull: false });
      // A cgroup counts its own OOM kills; the process tree only knows the machine's (null: another process's).
      expect(EXPECTED === 'PROCESS_TREE' ? [false, null] : [false]).toContain(measured.outOfMemory);
      // The run's cgroup is gone with it (this agent's leaves only: other tests' agents may share the parent).
      const cgroup = agent.logged('how peak memory is measured')[0].cgroup as string | undefined;
      if (EXPECTED !== 'PROCESS_TREE')
        expect(fs.readdirSync(cgroup!).filter((name) => name.startsWith(`tagsched-run-${agent.agentPid()}-`))).toEqual(
          [],
        );

      // The histograms of /metrics, labelled by task.
      const metrics = await until('the run to be counted in /metrics', async () => {
        const text = await (await fetch(server.url.replace(/\/graphql$/, '/metrics'))).text();
        return /tagsched_run_peak_memory_bytes_count\{task="noop"\} 1/.test(text) && text;
      });
      expect(metrics).toMatch(/tagsched_run_phase_seconds_count\{task="noop",phase="run"\} 1/);
      expect(metrics).toMatch(/tagsched_run_peak_disk_bytes_count\{task="noop"\} 1/);
      expect(metrics).toMatch(/tagsched_run_cpu_seconds_count\{task="noop"\} 1/);

      // On the request's status page and in tagsched-admin work show.
      const page = await fetch(server.url.replace(/\/graphql$/, `/-/status/work-requests/${id}/`), {
        headers: { authorization: `Bearer ${ADMIN}` },
      });
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain(`peak memory ${(s.peakMemoryBytes / MIB).toFixed(1)} MiB (${LABELS[EXPECTED]})`);
      expect(html).toContain(`peak disk ${(s.peakDiskBytes / MIB).toFixed(1)} MiB in its directory`);
      const shown = await runCli(server.url, ['work', 'show', id], { token: ADMIN });
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toMatch(
        new RegExp(`Peak memory:\\s+${(s.peakMemoryBytes / MIB).toFixed(1)} MiB \\(${LABELS[EXPECTED]}\\)`),
      );
      expect(shown.stdout).toMatch(
        new RegExp(`Peak disk:\\s+${(s.peakDiskBytes / MIB).toFixed(1)} MiB in its run directory`),
      );
      expect(shown.stdout).toMatch(/Wall time:\s+run \d/);

      // Figures out of bounds are a typed error, never a 500; the kept figures stay as they were.
      for (const bad of [
        { peakMemoryBytes: 1e300 },
        { runSeconds: -1 },
        { cpuSeconds: 1e20 },
        { peakDiskBytes: 0.5 },
        { memoryLimitBytes: -1 },
        { memoryLimitBytes: 2 ** 60 },
        { memoryLimitBytes: 1.5 },
      ]) {
        const statistics = {
          setupSeconds: 0,
          runSeconds: 1,
          teardownSeconds: 0,
          cpuCount: 1,
          memoryMethod: 'PROCESS_TREE',
          ...bad,
        };
        const answer = await f.gql(
          server.url,
          `mutation($s: RunStatisticsInput) { completeWorkRequest(input: { id: "${id}", result: SUCCESS, statistics: $s }) { __typename ... on Error { code message } } }`,
          { s: statistics },
          agent.token,
        );
        expect(answer.status).toBe(200);
        expect(answer.data?.completeWorkRequest, JSON.stringify(answer)).toMatchObject({
          __typename: 'InputError',
          code: 'INVALID_INPUT',
        });
      }
      const huge = await f.gql(
        server.url,
        `mutation { completeWorkRequest(input: { id: "${id}", result: SUCCESS, statistics: { setupSeconds: 0, runSeconds: 1, teardownSeconds: 0, cpuCount: 99999999999, memoryMethod: PROCESS_TREE } }) { __typename } }`,
        {},
        agent.token,
      );
      expect(huge.status).toBeLessThan(500);

      // A failed run's figures are kept too.
      const failing = await f.gql(
        server.url,
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: { result: false } }) { ... on WorkRequest { id } } }`,
      );
      const failedId = failing.data!.createWorkRequest.id as string;
      expect((await settled(f, [failedId]))[0]).toMatchObject({ status: 'COMPLETED', result: 'FAILURE' });
      const failed = (
        await f.gql(server.url, `query($id: ID!) { workRequest(id: $id) { ${STATISTICS} } }`, { id: failedId })
      ).data?.workRequest?.statistics;
      expect(failed.peakMemoryBytes / MIB).toBeGreaterThan(300 * 0.9);
      expect(failed.peakDiskBytes / MIB).toBeGreaterThan(200 * 0.9);
      expect(
        (await f.gql(server.url, `query($id: ID!) { workRequest(id: $id) { ${STATISTICS} } }`, { id })).data
          ?.workRequest?.statistics,
      ).toEqual(s);
    } finally {
      await server.stop();
    }
  }, 120_000);
  it('in a run cgroup with a 64 MiB limit (--handler-memory-limit), a handler that takes 300 MiB is killed by the OOM killer and the run says outOfMemory', async () => {
    const server = await f.server();
    try {
      const agent = await f.agent({
        name: 'stats-oom',
        url: server.url,
        output: ALLOCATE,
        sleep: '0',
        env: { TAGSCHED_HANDLER_MEMORY_LIMIT: '64' },
      });
      const id = await f.createNoop(server.url);
      await settled(f, [id]);
      const measured = await agent.waitForLog('run measured', (l) => l.id === id);
      if (EXPECTED === 'PROCESS_TREE') {
        // No cgroup here: the limit cannot be applied, and the agent says so at start.
        expect(
          agent.logged('no memory cgroup: --handler-memory-limit (TAGSCHED_HANDLER_MEMORY_LIMIT) is not applied'),
        ).toHaveLength(1);
        expect(measured.memoryMethod).toBe('PROCESS_TREE');
        return;
      }
      expect(measured).toMatchObject({ memoryMethod: EXPECTED, outOfMemory: true });
      // The peak is the cgroup's: at the limit, far below the 300 MiB asked for.
      expect(measured.peakMemoryBytes as number).toBeLessThanOrEqual(64 * MIB);
      expect(measured.peakMemoryBytes as number).toBeGreaterThan(32 * MIB);
      // Python was killed (SIGKILL: the handler's shell saw 137 and went on); its output says so.
      const log = await f.gql(
        server.url,
        `query($id: ID!) { workRequest(id: $id) { status statistics { memoryMethod peakMemoryBytes outOfMemory memoryLimitBytes } } }`,
        { id },
      );
      expect(log.data?.workRequest).toMatchObject({
        status: 'COMPLETED',
        statistics: {
          memoryMethod: EXPECTED,
          peakMemoryBytes: measured.peakMemoryBytes,
          outOfMemory: true,
          memoryLimitBytes: 64 * MIB,
        },
      });
    } finally {
      await server.stop();
    }
  }, 120_000);

  it.runIf(EXPECTED !== 'PROCESS_TREE')(
    'an agent that stops without draining (its token refused) waits for its stopped runs: what a handler left running in the background ends with its cgroup',
    async () => {
      const server = await f.server();
      const pidFile = path.join(os.tmpdir(), `tagsched-daemon-${process.pid}.pid`);
      fs.rmSync(pidFile, { force: true });
      const alive = (pid: number) => {
        try {
          return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
        } catch {
          return false;
        }
      };
      try {
        // A daemon in a session of its own: out of the handler's process group, still in the run's cgroup.
        const agent = await f.agent({
          name: 'stats-daemon',
          url: server.url,
          output: `setsid sh -c 'echo $$ > ${pidFile}; exec sleep 300' </dev/null >/dev/null 2>&1 &`,
          sleep: '120',
        });
        await f.createNoop(server.url);
        const daemon = await until('the daemon to start', () =>
          fs.existsSync(pidFile) && Number(fs.readFileSync(pidFile, 'utf8')) > 0
            ? Number(fs.readFileSync(pidFile, 'utf8'))
            : null,
        );
        expect(alive(daemon)).toBe(true);
        const revoked = await f.gql(server.url, `mutation { revokeToken(input: {}) { __typename } }`, {}, agent.token);
        expect(revoked.errors, JSON.stringify(revoked)).toBeUndefined();
        expect(await agent.exited).toBe(2);
        await until('the daemon to end with its run', () => !alive(daemon), 5_000);
      } finally {
        // Left running when the test fails: not past this test.
        const left = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8')) : 0;
        if (left > 0 && alive(left)) process.kill(left, 'SIGKILL');
        fs.rmSync(pidFile, { force: true });
        await server.stop();
      }
    },
    120_000,
  );

  it('with --memory-cgroup off (TAGSCHED_MEMORY_CGROUP=off) measures the process tree', async () => {
    const server = await f.server();
    try {
      const agent = await f.agent({
        name: 'stats-off',
        url: server.url,
        output: ALLOCATE,
        sleep: '0',
        env: { TAGSCHED_MEMORY_CGROUP: 'off' },
      });
      expect(agent.logged('how peak memory is measured')[0]).toMatchObject({
        memoryMethod: 'PROCESS_TREE',
        why: expect.stringContaining('--memory-cgroup off'),
      });
      const id = await f.createNoop(server.url);
      expect((await settled(f, [id]))[0]).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS' });
      const s = (await f.gql(server.url, `query($id: ID!) { workRequest(id: $id) { ${STATISTICS} } }`, { id })).data
        ?.workRequest?.statistics;
      expect(s.memoryMethod).toBe('PROCESS_TREE');
      expect(s.peakMemoryBytes / MIB).toBeGreaterThan(300 * 0.9);
      expect(s.peakMemoryBytes / MIB).toBeLessThan(300 * 1.1);
      const measured = await agent.waitForLog('run measured', (l) => l.id === id);
      // The machine's OOM count did not rise (false), or rose for another process than the handler (null: unknown).
      expect([false, null]).toContain(measured.outOfMemory);
      expect(measured.diskFull).toBe(false);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
