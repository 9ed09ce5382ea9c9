import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cgroupDir, parseCgroupMounts, parseProcCgroup } from '../../src/agent/cgroup.js';
import { until, useFleet, type Fleet } from '../faults/harness.js';
import { expectedMemoryMethod } from './memory-cgroup.js';

// A real agent on a worker that shares its resources (8 CPUs, 16 GiB): the server packs requests onto it by
// what they reserve, holds it for a large request, backfills short work around it, and the agent runs each
// request within its reservation (TAGSCHED_PARALLEL from its CPUs, its cgroup's memory limit from its
// memory). Each handler run records itself and then waits for the test to release it, so the test decides
// when every run ends.
const f = useFleet();
const GIB = 1024 ** 3;
const EXPECTED = expectedMemoryMethod();

interface Seen {
  id: string;
  parallel: number;
  pid: number;
}

const seen = (fleet: Fleet): Seen[] => {
  const file = path.join(fleet.dir, 'seen.log');
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [id, parallel, pid] = l.split(' ');
      return { id, parallel: Number(parallel), pid: Number(pid) };
    });
};

/** The memory limit of the cgroup process `pid` is in, read from the kernel's files; null without one. */
function memoryLimitOf(pid: number): number | null {
  const own = parseProcCgroup(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
  const mounts = parseCgroupMounts(fs.readFileSync('/proc/self/mountinfo', 'utf8'));
  const v2 = mounts.find((m) => m.type === 'cgroup2');
  const v1 = mounts.find((m) => m.type === 'cgroup' && m.options.includes('memory'));
  const file =
    EXPECTED === 'CGROUP_V2' && v2 && own.unified !== null
      ? path.join(cgroupDir(v2, own.unified) ?? '', 'memory.max')
      : EXPECTED === 'CGROUP_V1' && v1 && own.memoryV1 !== null
        ? path.join(cgroupDir(v1, own.memoryV1) ?? '', 'memory.limit_in_bytes')
        : null;
  if (!file) return null;
  const text = fs.readFileSync(file, 'utf8').trim();
  return text === 'max' ? null : Number(text);
}

describe('a real agent on a worker that shares its resources', () => {
  it('runs four 2-CPU requests at once, holds the host for a 12 GiB request with short work backfilled, and limits that run to 12 GiB', async () => {
    // The statistics say a noop runs an hour and a blhc two seconds (seeded before the server reads them).
    await f.sql(
      `insert into task_duration (task_type, task_name, day, runs, seconds)
       values ('worker', 'noop', current_date, 10, 36000), ('worker', 'blhc', current_date, 10, 20)`,
    );
    const server = await f.server();
    try {
      const output = [
        `echo "$TAGSCHED_WORK_REQUEST_ID $TAGSCHED_PARALLEL $$" >> "${path.join(f.dir, 'seen.log')}"`,
        `while [ ! -e "${f.dir}/release-$TAGSCHED_WORK_REQUEST_ID" ]; do sleep 0.1; done`,
      ].join('; ');
      await f.agent({
        name: 'host-8',
        url: server.url,
        concurrency: 8,
        sleep: '0',
        output,
        handlers: ['noop', 'blhc'],
        registration: {
          offersResources: true,
          staticMetadata: { cpuCount: 8, totalPhysicalMemory: 16 * GIB, diskFree: 100 * GIB },
        },
      });
      const submit = async (taskName: string, resources: Record<string, number>) => {
        const r = await f.gql(
          server.url,
          `mutation($n: String!, $r: ResourcesInput) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: $n, taskData: {}, resources: $r }) {
             ... on WorkRequest { id } ... on Error { code message } } }`,
          { n: taskName, r: resources },
        );
        const id = r.data?.createWorkRequest?.id as string | undefined;
        if (!id) throw new Error(JSON.stringify(r));
        return id;
      };
      const status = async (id: string) =>
        (await f.gql(server.url, `query($id: ID!) { workRequest(id: $id) { status } }`, { id })).data?.workRequest
          ?.status as string;
      const release = (id: string) => fs.writeFileSync(path.join(f.dir, `release-${id}`), '');
      const started = (ids: readonly string[]) =>
        until(`${ids.join(', ')} to start; seen: ${JSON.stringify(seen(f))}`, () =>
          ids.every((id) => seen(f).some((s) => s.id === id)),
        );
      const completed = (id: string) => until(`${id} to complete`, async () => (await status(id)) === 'COMPLETED');

      // Four 2-CPU, 2 GiB requests fill the 8 CPUs: all four run at once, each told to use 2 CPUs.
      const small = [];
      for (let i = 0; i < 4; i++) small.push(await submit('noop', { cpus: 2, memoryMib: 2048 }));
      await started(small);
      expect(seen(f).map((s) => s.parallel)).toEqual([2, 2, 2, 2]);

      // A 12 GiB request waits for two of them to end and holds the host; behind it, a noop (an hour, by
      // the statistics) that would still run when it is to start, and a blhc (two seconds) that would not.
      const big = await submit('noop', { cpus: 2, memoryMib: 12 * 1024 });
      const delaying = await submit('noop', { cpus: 2, memoryMib: 2048 });
      const short = await submit('blhc', { cpus: 2, memoryMib: 2048 });
      release(small[0]);
      await completed(small[0]);
      // The short one is backfilled into the freed 2 CPUs; the one that would delay the big one is held back.
      await started([short]);
      const worker = await f.gql(
        server.url,
        `query { worker(name: "host-8") { reservation { workRequestId } freeResources { cpus memoryMib } } }`,
      );
      expect(worker.data?.worker).toEqual({
        reservation: { workRequestId: big },
        freeResources: { cpus: 0, memoryMib: 8 * 1024 },
      });
      const diagnosis = await f.gql(
        server.url,
        `query($id: ID!) { workRequest(id: $id) { status diagnosis { state resourceWaits { workerName reasons } } } }`,
        { id: delaying },
      );
      expect(diagnosis.data?.workRequest).toMatchObject({
        status: 'PENDING',
        diagnosis: {
          state: 'WAITING_FOR_CAPACITY',
          resourceWaits: [
            {
              workerName: 'host-8',
              reasons: [
                'needs 2 CPUs; host-8 has 0 free of 8', // the short one took them
                expect.stringMatching(new RegExp(`^host-8 is held for work request ${big}, expected to fit at `)),
              ],
            },
          ],
        },
      });
      expect(await status(big)).toBe('PENDING');
      release(short);
      await completed(short);

      // One more small one ends: 4 CPUs and 12 GiB free, the big one starts, limited to 12 GiB.
      release(small[1]);
      await started([big]);
      const run = seen(f).find((s) => s.id === big)!;
      expect(run.parallel).toBe(2);
      if (EXPECTED !== 'PROCESS_TREE') expect(memoryLimitOf(run.pid)).toBe(12 * GIB);
      expect(await status(delaying)).toBe('PENDING'); // no memory left for it: 0 GiB free
      for (const id of [small[2], small[3], big, delaying]) release(id);
      await completed(delaying);
      const stats = await f.gql(
        server.url,
        `query($id: ID!) { workRequest(id: $id) { runLimits { cpus memoryMib } statistics { memoryMethod memoryLimitBytes } } }`,
        { id: big },
      );
      expect(stats.data?.workRequest).toEqual({
        runLimits: { cpus: 2, memoryMib: 12 * 1024 },
        statistics: { memoryMethod: EXPECTED, memoryLimitBytes: EXPECTED === 'PROCESS_TREE' ? null : 12 * GIB },
      });
    } finally {
      await server.stop();
    }
  }, 180_000);
});
