import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { until } from './faults/harness.js';
import { httpGql, startServerProcess, type ServerProcess } from './helpers/server-process.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-embedded-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** The first admin token a server printed on stderr, once it has arrived (or undefined after 10 s). */
const adminTokenOf = (server: ServerProcess) =>
  until(
    () => `the admin token on stderr:\n${server.stderr()}`,
    () => /^\s+(tsk_admin_\S+)$/m.exec(server.stderr())?.[1],
    10_000,
    50,
  ).catch(() => undefined);

// With no DATABASE_URL the service runs on PGlite persisted in TAGSCHED_DATA_DIR.
const env = { DATABASE_URL: undefined, TAGSCHED_DATA_DIR: dataDir, TAGSCHED_ADMIN_TOKEN: undefined };

describe('embedded PostgreSQL (no DATABASE_URL)', () => {
  it('keeps work requests across a restart, and prints the admin token only on the first start', async () => {
    const first = await startServerProcess(env);
    let id: string;
    try {
      // The banner is on stderr, the "listening" line the start waited for on stdout: two pipes, either may arrive first.
      const token = await adminTokenOf(first);
      expect(token, first.stderr()).toBeDefined();
      const ws = await httpGql(
        first.url,
        `mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`,
        {},
        token,
      );
      expect(ws.data?.createWorkspace.__typename).toBe('Workspace');
      const created = await httpGql(
        first.url,
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { __typename ... on WorkRequest { id status } } }`,
        {},
        token,
      );
      expect(created.data?.createWorkRequest).toMatchObject({ __typename: 'WorkRequest', status: 'PENDING' });
      id = created.data!.createWorkRequest.id;
      expect(await first.stop()).toBe(0);

      const second = await startServerProcess(env);
      try {
        expect(second.stderr()).not.toContain('tsk_admin_');
        const read = await httpGql(
          second.url,
          `query($id: ID!) { workRequest(id: $id) { id taskName status workspace { name } } }`,
          { id },
          token,
        );
        expect(read.data?.workRequest).toEqual({
          id,
          taskName: 'noop',
          status: 'PENDING',
          workspace: { name: 'debian/main' },
        });
      } finally {
        expect(await second.stop()).toBe(0);
      }
    } finally {
      await first.stop();
    }
  }, 180_000);

  it('a worker pulls its work, one request after another (its later pulls in one round trip), on the single session', async () => {
    const server = await startServerProcess({
      ...env,
      TAGSCHED_DATA_DIR: fs.mkdtempSync(path.join(dataDir, 'pulls-')),
      TAGSCHED_SCHEDULER: 'manual',
    });
    try {
      const admin = await adminTokenOf(server);
      expect(admin, server.stderr()).toBeDefined();
      const call = async (query: string, variables: Record<string, unknown>, token: string | undefined) => {
        const res = await httpGql(server.url, query, variables, token);
        // On a failure, the server's last log lines say why (it logs the error behind an answer's INTERNAL_SERVER_ERROR).
        expect(res.errors, `${JSON.stringify(res.errors)}\n${server.logTail().slice(-4000)}`).toBeUndefined();
        return res.data!;
      };
      await call(`mutation { createWorkspace(input: { name: "debian/pulls" }) { __typename } }`, {}, admin);
      const worker = (
        await call(
          `mutation { registerWorker(input: { name: "pull-1" }) { ... on WorkerTokenPayload { token } } }`,
          {},
          admin,
        )
      ).registerWorker.token as string;
      const metadata = { architectures: ['amd64'], tasks: [{ type: 'worker', name: 'noop', version: 1 }] };
      expect(
        (
          await call(
            `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
            { m: metadata },
            worker,
          )
        ).reportWorkerMetadata.__typename,
      ).toBe('Worker');
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const created = await call(
          `mutation { createWorkRequest(input: { workspace: "debian/pulls", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
          {},
          admin,
        );
        ids.push(created.createWorkRequest.id as string);
      }
      const pull = async () =>
        (
          await call(
            `mutation { requestWork { ... on RequestWorkPayload { workRequest { id status worker { name } } } } }`,
            {},
            worker,
          )
        ).requestWork.workRequest;
      for (const id of ids) {
        expect(await pull()).toEqual({ id, status: 'ASSIGNED', worker: { name: 'pull-1' } });
        expect(await pull()).toBeNull(); // its one slot is held
        await call(`mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, worker);
        const done = await call(
          `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { ... on WorkRequest { status } } }`,
          { id },
          worker,
        );
        expect(done.completeWorkRequest.status).toBe('COMPLETED');
      }
      expect(await pull()).toBeNull();
    } finally {
      expect(await server.stop()).toBe(0);
    }
  }, 180_000);

  it('refuses a second server on the same data directory', async () => {
    const server = await startServerProcess(env);
    try {
      await expect(startServerProcess(env, 60_000)).rejects.toThrow(/in use by process/);
    } finally {
      await server.stop();
    }
  }, 180_000);
});
