import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/server/app.js';
import { loadConfig } from '../../src/core/config/config.js';
import { createLogger } from '../../src/core/log.js';
import { ADMIN_TOKEN, useTestApp } from '../helpers/app.js';
import { collect, wsClient } from '../helpers/ws.js';

// App A is the harness; app B is a second server on the same database, with automatic passes on.
const a = useTestApp();
let b: App;
let bUrl: string;

beforeAll(async () => {
  b = await buildApp(
    loadConfig(
      {},
      {
        server: {
          databaseUrl: a.dbUrl,
          dataDir: path.join(os.tmpdir(), 'tagsched-test'),
          adminToken: ADMIN_TOKEN,
          secretKey: 'test-secret-key',
          port: 0,
          host: '127.0.0.1',
        },
      },
    ),
    { log: createLogger('silent') },
  );
  ({ url: bUrl } = await b.start());
});
afterAll(async () => {
  await b?.stop();
});

describe('two server processes on one database', () => {
  it('delivers a request created through A to a worker subscribed on B', async () => {
    await a.gql(`mutation { createWorkspace(input: { name: "debian/main" }) { __typename } }`);
    const token = (
      await a.gql(`mutation { registerWorker(input: { name: "far" }) { ... on WorkerTokenPayload { token } } }`)
    ).data!.registerWorker.token as string;
    const { client } = wsClient(bUrl, token);
    try {
      await a.gql(
        `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) { __typename } }`,
        {
          m: {
            architectures: ['amd64'],
            executors: ['unshare'],
            tasks: [{ type: 'worker', name: 'noop', version: 1 }],
          },
        },
        token,
      );
      const sub = collect(client, `subscription { assignments { id taskName } }`);
      await new Promise((r) => setTimeout(r, 300)); // the subscription's LISTEN is in place
      const created = await a.gql(
        `mutation { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "noop", taskData: {} }) { ... on WorkRequest { id } } }`,
      );
      const id = created.data!.createWorkRequest.id as string;
      // A runs no passes by itself: its event reaches B through PostgreSQL, B's pass assigns, B pushes.
      expect(await sub.next(1)).toEqual([{ assignments: { id, taskName: 'noop' } }]);
      sub.dispose();
    } finally {
      await client.dispose();
    }
  });
});
