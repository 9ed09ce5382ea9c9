/**
 * Workflows, server tasks and signing with real server processes (src/server.ts) and real agents
 * (bin/tagsched-worker.js) over real WebSockets, on PostgreSQL: a debian_pipeline submitted through
 * the API runs to its combined result, a failing child, an abort in the middle, signing work, and a
 * server task taken from a killed server process by the lease rules. Every handler run is recorded
 * (test/faults/harness.ts); nothing waits for a fixed time.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { serverWorkerName } from '../../src/loops/server-tasks/server-workers.js';
import { expectExactlyOnce, settled, states, until, useFleet, type Agent, type Server } from '../faults/harness.js';

const f = useFleet();

const CHECKS = ['lintian', 'autopkgtest', 'piuparts'] as const;
/** What a build machine of the test reports beyond what this machine has (no sbuild or autopkgtest installed here). */
const BUILD_TAGS = ['worker:cap:sbuild', 'worker:cap:autopkgtest', 'worker:executor:unshare'];

let environmentsMade: Promise<void> | null = null;
/** The trixie environments of both architectures, made once for the file's database. */
function environments(server: Server): Promise<void> {
  environmentsMade ??= (async () => {
    for (const arch of ['amd64', 'arm64']) {
      const r = await f.gql(
        server.url,
        `mutation($a: String!) { createEnvironment(input: { codename: "trixie", architecture: $a }) { __typename } }`,
        { a: arch },
      );
      expect(r.data?.createEnvironment).toEqual({ __typename: 'Environment' });
    }
  })();
  return environmentsMade;
}

/** One build machine per architecture (the admin's static metadata says which), running every task of the pipeline; named `PREFIX-ARCH`. */
async function buildMachines(
  server: Server,
  prefix: string,
  env: Record<string, string> = {},
): Promise<Record<'amd64' | 'arm64', Agent>> {
  const machine = (arch: string) =>
    f.agent({
      name: `${prefix}-${arch}`,
      url: server.url,
      handlers: ['sbuild', ...CHECKS, 'noop'],
      providedTags: BUILD_TAGS,
      registration: { staticMetadata: { architectures: [arch] } },
      env,
    });
  const [amd64, arm64] = await Promise.all([machine('amd64'), machine('arm64')]);
  return { amd64, arm64 };
}

async function create(server: Server, input: Record<string, unknown>): Promise<string> {
  const r = await f.gql(
    server.url,
    `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { __typename ... on WorkRequest { id } ... on Error { code message } } }`,
    { i: input },
  );
  const created = r.data?.createWorkRequest;
  if (created?.__typename !== 'WorkRequest') throw new Error(`createWorkRequest: ${JSON.stringify(r)}`);
  return created.id as string;
}

const pipeline = {
  workspace: 'debian/main',
  taskType: 'workflow',
  taskName: 'debian_pipeline',
  taskData: { source_package: 'hello', vendor: 'debian', codename: 'trixie', architectures: ['amd64', 'arm64'] },
};

interface Child {
  id: string;
  taskName: string;
  status: string;
  result: string | null;
  statusReason: string | null;
  taskData: { host_architecture: string };
  worker: { name: string } | null;
}

async function workflow(
  server: Server,
  id: string,
): Promise<{ status: string; result: string | null; statusReason: string | null; children: Child[] }> {
  const r = await f.gql(
    server.url,
    `query($id: ID!) { workRequest(id: $id) { status result statusReason children(first: 50) { edges { node { id taskName status result statusReason taskData worker { name } } } } } }`,
    { id },
  );
  const wr = r.data!.workRequest;
  return { ...wr, children: wr.children.edges.map((e: { node: Child }) => e.node) };
}

/** The runs log in order: "start ID AGENT PID" and "done ID AGENT PID". */
const runLines = () => fs.readFileSync(path.join(f.dir, 'runs.log'), 'utf8').split('\n').filter(Boolean);
const lineOf = (kind: 'start' | 'done', id: string) => runLines().findIndex((l) => l.startsWith(`${kind} ${id} `));

describe('a debian_pipeline with real agents', () => {
  it('runs to SUCCESS: the builds, then each architecture checks on the build machine of that architecture, each child exactly once', async () => {
    const server = await f.server();
    await environments(server);
    const agents = await buildMachines(server, 'ok');
    const id = await create(server, pipeline);
    const [final] = await settled(f, [id]);
    expect(final).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS', statusReason: null });

    const wf = await workflow(server, id);
    expect(wf.children.map((c) => `${c.taskName}:${c.taskData.host_architecture}`).sort()).toEqual(
      ['amd64', 'arm64'].flatMap((a) => ['sbuild', ...CHECKS].map((t) => `${t}:${a}`)).sort(),
    );
    const children = await states(
      f,
      wf.children.map((c) => c.id),
    );
    expect(expectExactlyOnce(f, children)).toEqual({ completed: 8, aborted: 0 });
    for (const c of wf.children) {
      expect(c.worker?.name, `${c.taskName} ${c.taskData.host_architecture}`).toBe(
        `ok-${c.taskData.host_architecture}`,
      );
      if (c.taskName === 'sbuild') continue;
      const build = wf.children.find(
        (b) => b.taskName === 'sbuild' && b.taskData.host_architecture === c.taskData.host_architecture,
      )!;
      expect(
        lineOf('start', c.id),
        `${c.taskName} ${c.taskData.host_architecture} started after its build finished`,
      ).toBeGreaterThan(lineOf('done', build.id));
    }
    for (const a of Object.values(agents)) expect(a.logged('result dropped'), a.name).toEqual([]);
  }, 120_000);

  it('a failing child makes it FAILURE; that build still releases its checks, and the workflow its own dependents once it completes', async () => {
    const server = await f.server();
    await environments(server);
    await buildMachines(server, 'failing', { FAULT_FAIL_MATCH: 'sbuild:*"host_architecture":"arm64"*' });
    const id = await create(server, pipeline);
    const after = await create(server, {
      workspace: 'debian/main',
      taskType: 'worker',
      taskName: 'noop',
      taskData: {},
      dependsOn: [id],
    });
    const [wf, dependent] = await settled(f, [id, after]);
    expect(wf).toMatchObject({ status: 'COMPLETED', result: 'FAILURE' });
    expect(dependent).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS' });

    const { children, statusReason } = await workflow(server, id);
    const failed = children.find((c) => c.taskName === 'sbuild' && c.taskData.host_architecture === 'arm64')!;
    expect(statusReason).toBe(`1 of 8 children did not succeed: ${failed.id} (sbuild) FAILURE`);
    expect(children.map((c) => [c.taskName, c.taskData.host_architecture, c.status, c.result])).toEqual(
      children.map((c) => [
        c.taskName,
        c.taskData.host_architecture,
        'COMPLETED',
        c.id === failed.id ? 'FAILURE' : 'SUCCESS',
      ]),
    );
    // Each child ran once, the failed build too, and its checks after it.
    const runs = f.executions();
    for (const c of children)
      expect(
        runs.filter((r) => r.id === c.id && r.done).map((r) => r.agent),
        c.id,
      ).toEqual([`failing-${c.taskData.host_architecture}`]);
    for (const c of children.filter((x) => x.taskName !== 'sbuild' && x.taskData.host_architecture === 'arm64'))
      expect(lineOf('start', c.id)).toBeGreaterThan(lineOf('done', failed.id));
  }, 120_000);

  it('an abort in the middle aborts the children that have not finished and the dependents; nothing runs after it', async () => {
    const server = await f.server();
    await environments(server);
    const agents = await buildMachines(server, 'aborted', { FAULT_SLEEP: '3' });
    const id = await create(server, pipeline);
    const after = await create(server, {
      workspace: 'debian/main',
      taskType: 'worker',
      taskName: 'noop',
      taskData: {},
      dependsOn: [id],
    });
    const builds = await until('both builds to be running', async () => {
      const { children } = await workflow(server, id);
      const running = children.filter((c) => c.taskName === 'sbuild' && c.status === 'RUNNING');
      return running.length === 2 && running.map((c) => c.id);
    });
    const r = await f.gql(
      server.url,
      `mutation($id: ID!) { abortWorkRequest(input: { id: $id }) { __typename ... on WorkRequest { status } ... on Error { code message } } }`,
      {
        id,
      },
    );
    expect(r.data!.abortWorkRequest).toEqual({ __typename: 'WorkRequest', status: 'ABORTED' });

    const { children } = await workflow(server, id);
    expect(children.map((c) => [c.status, c.statusReason])).toEqual(
      children.map(() => ['ABORTED', `workflow ${id} was aborted by admin`]),
    );
    expect((await states(f, [after]))[0]).toMatchObject({
      status: 'ABORTED',
      statusReason: `dependency ${id} was aborted`,
    });
    // The builds that were running end on their machines; their results are refused, and nothing else starts.
    for (const [arch, agent] of Object.entries(agents)) {
      const build = children.find((c) => c.taskName === 'sbuild' && c.taskData.host_architecture === arch)!;
      await agent.waitForLog('result dropped', (l) => l.id === build.id);
    }
    expect(
      f
        .executions()
        .filter((e) => children.some((c) => c.id === e.id))
        .map((e) => e.id)
        .sort(),
    ).toEqual([...builds].sort());
    expect(
      await f.sql(`select id from work_request where status in ('PENDING', 'ASSIGNED', 'RUNNING', 'BLOCKED')`),
    ).toEqual([]);
  }, 120_000);
});

describe('signing work', () => {
  it('goes to the signing worker (registered as such, its agent started with its token) and no other; it gets no other work', async () => {
    const server = await f.server();
    const tasks = ['debsign', 'sign', 'generatekey', 'noop'];
    const tags = ['worker:cap:debsign', 'worker:cap:sbsign'];
    // Both offer the same tasks and tools: only the type differs.
    const [signer, plain] = await Promise.all([
      f.agent({
        name: 'signer',
        url: server.url,
        handlers: tasks,
        providedTags: tags,
        registration: { type: 'SIGNING' },
      }),
      f.agent({ name: 'plain', url: server.url, handlers: tasks, providedTags: tags }),
    ]);
    const fingerprint = 'A'.repeat(40);
    const signing = [
      await create(server, {
        workspace: 'debian/main',
        taskType: 'signing',
        taskName: 'debsign',
        taskData: { unsigned: 1, key: fingerprint },
      }),
      await create(server, {
        workspace: 'debian/main',
        taskType: 'signing',
        taskName: 'sign',
        taskData: { purpose: 'uefi', unsigned: [1], key: fingerprint },
      }),
      await create(server, {
        workspace: 'debian/main',
        taskType: 'signing',
        taskName: 'sign',
        taskData: { purpose: 'openpgp', unsigned: [2], key: fingerprint },
      }),
      await create(server, {
        workspace: 'debian/main',
        taskType: 'signing',
        taskName: 'generatekey',
        taskData: { purpose: 'openpgp', description: 'test key' },
      }),
    ];
    const ordinary = [await f.createNoop(server.url), await f.createNoop(server.url), await f.createNoop(server.url)];
    const final = await settled(f, [...signing, ...ordinary]);
    expect(expectExactlyOnce(f, final)).toEqual({ completed: 7, aborted: 0 });
    expect(final.map((s) => s.worker)).toEqual([...signing.map(() => 'signer'), ...ordinary.map(() => 'plain')]);
    // Nothing else was ever offered to either of them.
    expect(
      signer
        .logged('assignment received')
        .map((l) => l.id)
        .sort(),
    ).toEqual([...signing].sort());
    expect(
      plain
        .logged('assignment received')
        .map((l) => l.id)
        .sort(),
    ).toEqual([...ordinary].sort());
  }, 120_000);
});

/** A server process with its built-in server worker (the fault tests' default is none). */
const WITH_SERVER_WORKER = { TAGSCHED_SERVER_WORKERS: '1' };

describe('server tasks on the built-in server workers', () => {
  it('servernoop runs on a server worker of the service, with no agent at all', async () => {
    const server = await f.server(WITH_SERVER_WORKER);
    const ok = await create(server, {
      workspace: 'debian/main',
      taskType: 'server',
      taskName: 'servernoop',
      taskData: {},
    });
    const failing = await create(server, {
      workspace: 'debian/main',
      taskType: 'server',
      taskName: 'servernoop',
      taskData: { result: false },
    });
    const final = await settled(f, [ok, failing]);
    expect(final.map((s) => [s.status, s.result, s.retryCount])).toEqual([
      ['COMPLETED', 'SUCCESS', 0],
      ['COMPLETED', 'FAILURE', 0],
    ]);
    expect(final[1].statusReason).toBe('servernoop was asked to fail (taskData.result is false)');
    const [row] = await f.sql(`select type from worker where name = $1`, [final[0].worker]);
    expect(row.type).toBe('server');
    expect(server.logs.filter((l) => l.msg === 'server task started').map((l) => String(l.id))).toEqual([ok, failing]);
  }, 60_000);

  it('one held by a killed server process is taken back (lease or take-over) and run by another process', async () => {
    const dead = await f.server(WITH_SERVER_WORKER, 'dead');
    // Its process name is `<host>:<pid>` (PORT=0).
    const deadWorker = serverWorkerName(`${os.hostname()}:${dead.child.pid}`, 1, 1);
    expect(
      await f.sql(`select type, connected_at is not null as connected from worker where name = $1`, [deadWorker]),
    ).toEqual([{ type: 'server', connected: true }]);
    await dead.kill(); // its server worker is left "connected", as after any crash
    // Another process, without server workers of its own: the request is assigned to the dead one's.
    const other = await f.server({}, 'other');
    const id = await create(other, {
      workspace: 'debian/main',
      taskType: 'server',
      taskName: 'servernoop',
      taskData: {},
    });
    // Taken back by whichever comes first in the chores' leader (once the dead one's lease has expired): the
    // acknowledgement lease (a retry), or the take-over of a process that stopped heartbeating (its
    // unacknowledged work back uncounted: services/processes/registry.ts).
    const requeued = await until('the lease to expire or the dead process to be taken over', async () => {
      const [s] = await states(f, [id]);
      return s.status === 'PENDING' && s.statusReason !== null && s;
    });
    expect([
      `worker ${deadWorker} did not acknowledge the assignment in time; re-queued (retry 1 of 3)`,
      `worker ${deadWorker} lost its server process (${os.hostname()}:${dead.child.pid} stopped heartbeating); back to the queue, not started`,
    ]).toContain(requeued.statusReason);
    expect(requeued.retryCount).toBe(requeued.statusReason!.includes('retry 1 of 3') ? 1 : 0);
    expect(await f.sql(`select connected_at from worker where name = $1`, [deadWorker])).toEqual([
      { connected_at: null },
    ]);
    // A process with a server worker comes: it runs it, once.
    const fresh = await f.server(WITH_SERVER_WORKER, 'fresh');
    const [done] = await settled(f, [id]);
    expect(done).toMatchObject({ status: 'COMPLETED', result: 'SUCCESS', retryCount: requeued.retryCount });
    expect(done.worker).not.toBe(deadWorker);
    expect(fresh.logs.filter((l) => l.msg === 'server task started').map((l) => String(l.id))).toEqual([id]);
  }, 90_000);
});
