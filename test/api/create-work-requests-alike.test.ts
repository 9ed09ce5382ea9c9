/**
 * createWorkRequests analyses identical requests of a batch once, inserts the rows in one statement and
 * answers with the rows it wrote (services/work/create-work-requests.ts): what it stores, answers and
 * publishes must be what the same requests created one by one store, answer and publish.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { ERROR_FIELDS, createWorkspace, expectResult, memberOf, ok, sbuild, submitOk } from '../helpers/fixtures.js';

type Json = Record<string, any>;

const t = useTestApp({ input: { maxBatchRequests: 10 } });

/** Every field of a work request that needs no worker, and those that read more than its row (a batch answers with plain records). */
const FIELDS = `id taskType taskName taskData status result statusReason priority priorityBase priorityAdjustment
  workspace { name } createdBy { username } worker { name } parent { id } dependsOn hiddenDependencyCount
  providedTags { tag provenance source } requiredTags { tag provenance source } droppedTags { tag provenance source set code reason }
  userProvidedTags userRequiredTags retryCount quarantineProbe exitCode createdAt pendingAt assignedAt startedAt completedAt
  diagnosis { state matchingWorkers availableWorkers matchingPools } candidateWorkers(first: 5) { name } log { text totalBytes complete }
  statistics { runSeconds } cost children(first: 2) { edges { node { id } } }`;

/** A request but for what differs between two creates of it: its id and the times it was written. */
const sameRequest = ({ __typename: _, ...wr }: Json) => ({
  ...wr,
  id: null,
  createdAt: null,
  ...Object.fromEntries(['pendingAt', 'assignedAt', 'startedAt', 'completedAt'].map((at) => [at, wr[at] && 'set'])),
});

/** The stored columns a create decides (not the id, the times or the fair key). */
const STORED = `select status, status_reason, result, workspace_id, created_by_id, task_type, task_name, task_data, priority_base, priority_adjustment,
  user_provided_tags, user_required_tags, provided_tags, required_tags, provided_entries, required_entries, dropped_tags, class_id, expected_class_id,
  retry_count, quarantine_probe, worker_id, parent_id, pending_at is not null as pending, completed_at is not null as completed
  from work_request where id = any(?::int[]) order by id`;

let alice: string;
let dependency: string;

beforeAll(async () => {
  await createWorkspace(t, 'alike/main', { providableTagPrefixes: ['site:'] });
  alice = await memberOf(t, 'alike/main', 'alice');
  const group = await expectResult(
    t,
    'Group',
    `mutation { createGroup(input: { scope: "alike", name: "builders" }) { __typename ... on Group { id } ${ERROR_FIELDS} } }`,
  );
  await ok(t, `mutation($g: ID!) { addGroupMembers(input: { group: $g, usernames: ["alice"] }) { __typename } }`, {
    g: group.id,
  });
  const rule = `mutation($i: CreateTaskRuleInput!) { createTaskRule(input: $i) { __typename ${ERROR_FIELDS} } }`;
  // A workspace rule that adds tags to some packages and has one of them dropped, and a site rule.
  await expectResult(t, 'TaskRule', rule, {
    i: {
      workspace: 'alike/main',
      name: 'big',
      expression: 'task:source-package:linux',
      providedTags: ['task:scope:other', 'site:big'],
      requiredTags: ['worker:memory-gib>=16'],
    },
  });
  await expectResult(t, 'TaskRule', rule, {
    i: { name: 'arm-lab', expression: 'worker:build-architecture:arm64', requiredTags: ['site:arm-lab'] },
  });
  dependency = (await submitOk(t, sbuild('alike/main', 'base'), alice)).id;
});

/** The requests of the comparison: repeated ones, rule-made tags, user tags, data written in another key order, an orchestrated task, a dependency. */
function requests(): Json[] {
  return [
    sbuild('alike/main', 'hello'),
    sbuild('alike/main', 'hello'),
    sbuild('alike/main', 'linux'),
    sbuild('alike/main', 'linux', {
      requiredTags: ['worker:memory-gib>=32'],
      providedTags: ['site:urgent'],
      priorityBase: 5,
    }),
    {
      workspace: 'alike/main',
      taskType: 'worker',
      taskName: 'sbuild',
      taskData: { host_architecture: 'arm64', source_package: 'zlib', build_profiles: ['nocheck'] },
    },
    {
      workspace: 'alike/main',
      taskType: 'worker',
      taskName: 'sbuild',
      taskData: { host_architecture: 'arm64', source_package: 'zlib', build_profiles: ['nocheck'] },
    },
    { workspace: 'alike/main', taskType: 'worker', taskName: 'noop', taskData: {} },
    { workspace: 'alike/main', taskType: 'internal', taskName: 'synchronization_point', taskData: { step: 'done' } },
    sbuild('alike/main', 'after', { dependsOn: [dependency] }),
    sbuild('alike/main', 'hello', { priorityAdjustment: -3 }),
  ];
}

/** Collects the workRequestChanged events of the app, per request id. */
function listen(): { of: (id: string) => Json[] } {
  const seen = new Map<string, Json[]>();
  const stream = t.app.events.subscribe('workRequestChanged')[Symbol.asyncIterator]();
  void (async () => {
    for (let next = await stream.next(); !next.done; next = await stream.next()) {
      const { id, ...rest } = next.value;
      seen.set(String(id), [...(seen.get(String(id)) ?? []), rest]);
    }
  })();
  return { of: (id) => seen.get(id) ?? [] };
}

describe('createWorkRequests and createWorkRequest alike', () => {
  it('store, answer and publish the same for the same requests, and a batch answers what it stored', async () => {
    const events = listen();
    const batch = await ok(
      t,
      `mutation($i: CreateWorkRequestsInput!) { createWorkRequests(input: $i) { __typename ... on CreateWorkRequestsPayload { requests { ${FIELDS} } } ${ERROR_FIELDS} } }`,
      { i: { requests: requests() } },
      alice,
    );
    expect(batch.createWorkRequests.__typename).toBe('CreateWorkRequestsPayload');
    const together: Json[] = batch.createWorkRequests.requests;
    const single: Json[] = [];
    for (const input of requests()) {
      const r = await ok(
        t,
        `mutation($i: CreateWorkRequestInput!) { createWorkRequest(input: $i) { __typename ... on WorkRequest { ${FIELDS} } ${ERROR_FIELDS} } }`,
        { i: input },
        alice,
      );
      expect(r.createWorkRequest.__typename, JSON.stringify(r.createWorkRequest)).toBe('WorkRequest');
      single.push(r.createWorkRequest);
    }
    expect(together.map((wr) => wr.status)).toEqual([
      'PENDING',
      'PENDING',
      'PENDING',
      'PENDING',
      'PENDING',
      'PENDING',
      'PENDING',
      'COMPLETED',
      'BLOCKED',
      'PENDING',
    ]);
    expect(together[2].droppedTags.map((d: Json) => d.tag)).toEqual(['task:scope:other']);
    expect(together[4].taskData).toMatchObject({
      source_package: 'zlib',
      host_architecture: 'arm64',
      build_profiles: ['nocheck'],
    });

    // What the batch answered is what a read of each request answers now, and what one create answered.
    const ids = together.map((wr) => wr.id);
    for (const [i, id] of ids.entries()) {
      const read = (await ok(t, `query($id: ID!) { workRequest(id: $id) { ${FIELDS} } }`, { id }, alice)).workRequest;
      expect(together[i], `request ${i}`).toEqual(read);
      expect(JSON.stringify(together[i].taskData), `request ${i}: the data's keys in the order stored`).toBe(
        JSON.stringify(read.taskData),
      );
      expect(sameRequest(together[i]), `request ${i}`).toEqual(sameRequest(single[i]));
    }

    // The rows: the same tags, entries, classes (the expected one of the blocked request too) and state.
    const stored = (list: Json[]) => t.sql<Json>(STORED, [`{${list.map((wr) => wr.id).join(',')}}`]);
    const [rowsTogether, rowsSingle] = [await stored(together), await stored(single)];
    expect(rowsTogether).toEqual(rowsSingle);
    expect(rowsTogether[0].class_id).not.toBeNull();
    expect(rowsTogether[8]).toMatchObject({ status: 'BLOCKED', class_id: null });
    expect(rowsTogether[8].expected_class_id).not.toBeNull();

    // The same events for each request.
    await expect.poll(() => [...ids, ...single.map((wr) => wr.id)].every((id) => events.of(id).length > 0)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 200)); // any later event of the same requests
    for (const [i, id] of ids.entries()) expect(events.of(id), `request ${i}`).toEqual(events.of(single[i].id));
  });
});
