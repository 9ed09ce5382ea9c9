import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { httpGql, startServerProcess } from './helpers/server-process.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-embedded-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

// With no DATABASE_URL the service runs on PGlite persisted in TAGSCHED_DATA_DIR.
const env = { DATABASE_URL: undefined, TAGSCHED_DATA_DIR: dataDir, TAGSCHED_ADMIN_TOKEN: undefined };

describe('embedded PostgreSQL (no DATABASE_URL)', () => {
  it('keeps work requests across a restart, and prints the admin token only on the first start', async () => {
    const first = await startServerProcess(env);
    let id: string;
    try {
      const token = /^\s+(tsk_admin_\S+)$/m.exec(first.stderr())?.[1];
      expect(token, first.stderr()).toBeDefined();
      const ws = await httpGql(first.url, `mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`, {}, token);
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
        const read = await httpGql(second.url, `query($id: ID!) { workRequest(id: $id) { id taskName status workspace { name } } }`, { id }, token);
        expect(read.data?.workRequest).toEqual({ id, taskName: 'noop', status: 'PENDING', workspace: { name: 'debian/main' } });
      } finally {
        expect(await second.stop()).toBe(0);
      }
    } finally {
      await first.stop();
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
