import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';

const t = useTestApp();

describe('the path of a new user', () => {
  it('registers a worker, reports metadata, submits an sbuild for arm64 and reads both tag sets', async () => {
    const reg = await t.gql(`mutation { registerWorker(input: { name: "arm-1", concurrency: 2 }) {
      __typename ... on WorkerTokenPayload { token worker { name status } } ... on Error { code message } } }`);
    expect(reg.errors).toBeUndefined();
    expect(reg.data!.registerWorker.__typename).toBe('WorkerTokenPayload');
    const workerToken = reg.data!.registerWorker.token as string;

    const report = await t.gql(
      `mutation($m: WorkerMetadataInput!) { reportWorkerMetadata(input: { metadata: $m }) {
        __typename ... on Worker { name status providedTags { tag provenance source } rejectedTags { tag code reason } } } }`,
      {
        m: {
          architectures: ['arm64', 'armhf'],
          cpuCount: 8,
          totalPhysicalMemory: 16 * 1024 ** 3,
          diskFree: 100 * 1024 ** 3,
          executors: ['unshare'],
          tools: ['sbuild'],
          tasks: [{ type: 'worker', name: 'sbuild', version: 1 }],
          providedTags: ['worker:class:trusted'],
        },
      },
      workerToken,
    );
    expect(report.errors).toBeUndefined();
    const w = report.data!.reportWorkerMetadata;
    expect(w.status).toBe('IDLE');
    const provided = w.providedTags.map((e: { tag: string }) => e.tag);
    expect(provided).toEqual(
      expect.arrayContaining([
        'worker:build-arch:arm64',
        'worker:executor:unshare',
        'worker:cap:sbuild',
        'worker:type:worker',
        'worker:size:medium',
      ]),
    );
    expect(w.providedTags).toContainEqual({
      tag: 'worker:build-arch:arm64',
      provenance: 'WORKER',
      source: 'dynamic-metadata',
    });
    expect(w.providedTags).toContainEqual({ tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'worker.type' });
    expect(provided).not.toContain('worker:class:trusted');
    expect(w.rejectedTags).toEqual([
      expect.objectContaining({ tag: 'worker:class:trusted', code: 'PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY' }),
    ]);

    const ws = await t.gql(
      `mutation { createWorkspace(input: { name: "debian/main" }) { __typename ... on Workspace { name } } }`,
    );
    expect(ws.data!.createWorkspace).toEqual({ __typename: 'Workspace', name: 'debian/main' });
    const user = await t.gql(
      `mutation { createUser(input: { username: "alice" }) { ... on UserTokenPayload { token } } }`,
    );
    const aliceToken = user.data!.createUser.token as string;
    const member = await t.gql(
      `mutation { setWorkspaceMember(input: { workspace: "debian/main", username: "alice" }) { __typename } }`,
    );
    expect(member.data!.setWorkspaceMember.__typename).toBe('Workspace');

    const created = await t.gql(
      `mutation($d: JSON!) { createWorkRequest(input: { workspace: "debian/main", taskType: "worker", taskName: "sbuild", taskData: $d }) {
        __typename ... on WorkRequest { id status workspace { name } createdBy { username }
          providedTags { tag provenance source } requiredTags { tag provenance source } }
        ... on Error { code message } } }`,
      { d: { source_package: 'hello', host_architecture: 'arm64' } },
      aliceToken,
    );
    expect(created.errors).toBeUndefined();
    const wr = created.data!.createWorkRequest;
    expect(wr.__typename).toBe('WorkRequest');
    expect(wr.status).toBe('PENDING');
    expect(wr.createdBy.username).toBe('alice');
    expect(wr.providedTags).toEqual(
      expect.arrayContaining([
        { tag: 'task:scope:debian', provenance: 'SYSTEM', source: 'workspace' },
        { tag: 'task:workspace:debian:main', provenance: 'SYSTEM', source: 'workspace' },
        { tag: 'task:source-package:hello', provenance: 'SYSTEM', source: 'task-data:source_package' },
      ]),
    );
    expect(wr.requiredTags).toEqual(
      expect.arrayContaining([
        { tag: 'worker:build-arch:arm64', provenance: 'SYSTEM', source: 'task-data:host_architecture' },
        { tag: 'worker:executor:unshare', provenance: 'SYSTEM', source: 'task-data:backend' },
        { tag: 'worker:cap:sbuild', provenance: 'SYSTEM', source: 'task-registry' },
        { tag: 'worker:type:worker', provenance: 'SYSTEM', source: 'task-registry' },
        { tag: 'worker:task:worker:sbuild:version:1', provenance: 'SYSTEM', source: 'task-registry' },
      ]),
    );
  });
});
