import { describe, expect, it } from 'vitest';
import { useFleet } from './harness.js';

// No worker that shares its resources is ever over-committed: three server processes on one database,
// four 8-CPU, 16 GiB hosts, requests of random sizes; every round, pulls for every host through every
// process at once (each process's pass runs too, every second), and some of the assigned work completes.
// After every round, what each host's active work reserves is within what it offers, on each figure.
const f = useFleet();
const GIB = 1024 ** 3;

/** A small deterministic generator (mulberry32), so that a failure can be replayed. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};

const OVER_COMMITTED = `
  select w.name, w.offered_cpus, w.offered_memory_mib, w.offered_disk_mib,
         sum(r.reserved_cpus)::int as cpus, sum(r.reserved_memory_mib)::int as memory, sum(r.reserved_disk_mib)::int as disk
    from worker w join work_request r on r.worker_id = w.id and r.status in ('ASSIGNED', 'RUNNING')
   where w.offers_resources
   group by w.id
  having sum(r.reserved_cpus) > w.offered_cpus or sum(r.reserved_memory_mib) > w.offered_memory_mib
      or sum(r.reserved_disk_mib) > w.offered_disk_mib`;

describe('workers that share their resources, under concurrent pulls and passes', () => {
  it('are never over-committed, across three processes', async () => {
    const servers = [await f.server({}, 'a'), await f.server({}, 'b'), await f.server({}, 'c')];
    try {
      const url = servers[0].url;
      const hosts: { name: string; token: string }[] = [];
      for (let i = 0; i < 4; i++) {
        const name = `host-${i}`;
        const token = await f.registerWorker(url, name, 16, {
          offersResources: true,
          staticMetadata: { cpuCount: 8, totalPhysicalMemory: 16 * GIB, diskFree: 64 * GIB },
        });
        const report = await f.gql(
          url,
          `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
          { m: { architectures: ['amd64'], tasks: [{ type: 'worker', name: 'noop', version: 1 }] } },
          token,
        );
        expect(report.data?.reportWorkerMetadata.__typename, JSON.stringify(report)).toBe('Worker');
        hosts.push({ name, token });
      }
      const next = random(34);
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)];
      const total = 120;
      for (let i = 0; i < total; i++) {
        const resources = {
          cpus: pick([1, 2, 2, 4, 8]),
          memoryMib: pick([512, 2048, 4096, 12288]),
          diskMib: pick([0, 1024, 16384]),
        };
        const r = await f.gql(
          pick(servers).url,
          `mutation($r: ResourcesInput) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {}, resources: $r }) { ... on WorkRequest { id } ... on Error { message } } }`,
          { r: resources },
        );
        expect(r.data?.createWorkRequest.id, JSON.stringify(r)).toBeDefined();
      }
      const PULL = `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } ... on Error { code message } } }`;
      let rounds = 0;
      let assignedSeen = 0;
      for (;;) {
        rounds++;
        // Every host pulls through every process at once, twice.
        await Promise.all(hosts.flatMap((h) => [...servers, ...servers].map((s) => f.gql(s.url, PULL, {}, h.token))));
        expect(await f.sql(OVER_COMMITTED)).toEqual([]);
        // About half of the active work completes.
        const active = await f.sql<{ id: number; status: string; name: string }>(
          `select r.id, r.status, w.name from work_request r join worker w on w.id = r.worker_id where r.status in ('ASSIGNED', 'RUNNING')`,
        );
        assignedSeen = Math.max(assignedSeen, active.length);
        await Promise.all(
          active
            .filter(() => next() < 0.5)
            .map(async (a) => {
              const token = hosts.find((h) => h.name === a.name)!.token;
              const s = pick(servers).url;
              if (a.status === 'ASSIGNED')
                await f.gql(
                  s,
                  `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`,
                  { id: String(a.id) },
                  token,
                );
              await f.gql(
                s,
                `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
                { id: String(a.id) },
                token,
              );
            }),
        );
        expect(await f.sql(OVER_COMMITTED)).toEqual([]);
        const [{ left }] = await f.sql<{ left: number }>(
          `select count(*)::int as left from work_request where status not in ('COMPLETED', 'ABORTED')`,
        );
        if (!left) break;
        expect(rounds).toBeLessThan(400);
      }
      // The hosts were packed, not run one request at a time.
      expect(assignedSeen).toBeGreaterThan(hosts.length);
      const [{ done }] = await f.sql<{ done: number }>(
        `select count(*)::int as done from work_request where status = 'COMPLETED'`,
      );
      expect(done).toBe(total);
    } finally {
      for (const s of servers) await s.stop();
    }
  }, 300_000);
});
