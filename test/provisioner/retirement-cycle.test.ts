/**
 * Retiring pool workers in one process (src/scheduler/rules/instance-retirement.ts), against the
 * stand-in cloud of fake-cloud.ts: PostgreSQL drains a worker in the transaction of the assignment
 * that reaches its pool's maxWorkRequestsPerInstance (so it gets no more, whichever path assigns),
 * the cycle stops it once idle and launches its replacement; an instance past its pool's
 * maxInstanceLifetimeSeconds is drained, stopped once idle and replaced in the same cycle, never
 * while it runs work. And the rule's TypeScript and SQL agree.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  isOutdated,
  outdatedSql,
  outlived,
  outlivedSql,
  assignmentCountFunctionsSql,
  reachedWorkRequestLimit,
  reachedWorkRequestLimitSql,
  templateFingerprint,
} from '../../src/scheduler/rules/instance-retirement.js';
import { useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, ok, submitOk } from '../helpers/fixtures.js';
import { resetScheduling } from '../helpers/scheduler-fixtures.js';
import { bootLaunched, registerFakeCloud } from './fake-cloud.js';

const cloud = registerFakeCloud('fake-retire');
afterAll(() => cloud.unregister());

const t = useTestApp({
  provisioner: { enabled: true, agentServerUrl: 'http://tagsched.test/graphql', bootTimeoutMs: 600_000 },
  providers: { callTimeoutMs: 300 },
});

const noop = { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} };
const cycle = async () => (await t.app.provisioner.runCycle({ reconcile: false }))!;
const REQUEST_WORK = `mutation { requestWork { ... on RequestWorkPayload { workRequest { id } } } }`;

const boot = (index: number) => bootLaunched(t, cloud, index);

async function runOne(token: string): Promise<string | null> {
  const got = (await ok(t, REQUEST_WORK, {}, token)).requestWork.workRequest as { id: string } | null;
  if (!got) return null;
  await ok(t, `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id: got.id }, token);
  await ok(
    t,
    `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
    { id: got.id },
    token,
  );
  return got.id;
}

const workerOf = async (name: string) =>
  (
    await t.sql<{ draining: boolean; retiring_reason: string | null; assigned_total: number; terminated: boolean }>(
      `select draining, retiring_reason, assigned_total, terminated_at is not null as terminated from worker where name = ?`,
      [name],
    )
  )[0];

beforeAll(async () => {
  await createWorkspace(t, 'debian/main');
});
beforeEach(async () => {
  await resetScheduling(t);
  cloud.reset();
});

describe('retiring pool workers', () => {
  it('maxWorkRequestsPerInstance 2: drained by the assignment that reaches it, stopped once idle, replaced', async () => {
    await createPool(t, {
      name: 'two-each',
      providerType: 'fake-retire',
      maxActiveInstances: 1,
      maxWorkRequestsPerInstance: 2,
      specifications: { enableTasks: ['noop'] },
    });
    for (let i = 0; i < 3; i++) await submitOk(t, noop);
    await cycle();
    expect(cloud.launches).toHaveLength(1);
    const name = cloud.launches[0].spec.agent.workerName;
    const token = await boot(0);
    expect(await runOne(token)).not.toBeNull();
    expect(await workerOf(name)).toMatchObject({ draining: false, retiring_reason: null, assigned_total: 1 });
    expect(await runOne(token)).not.toBeNull();
    expect(await workerOf(name)).toMatchObject({ draining: true, retiring_reason: 'WORK_REQUESTS', assigned_total: 2 });
    expect(await runOne(token)).toBeNull(); // the third is not its
    const seen = await ok(t, `query($n: String!) { worker(name: $n) { status draining retiringReason } }`, { n: name });
    expect(seen.worker).toEqual({ status: 'DRAINING', draining: true, retiringReason: 'WORK_REQUESTS' });

    const report = await cycle();
    expect(report.stopped).toBe(1);
    expect(await workerOf(name)).toMatchObject({ terminated: true });
    expect(cloud.launches).toHaveLength(2); // its replacement, in the same cycle, for the third request
  });

  it('maxInstanceLifetimeSeconds: an instance past it retires, is never stopped while it runs work, and is replaced', async () => {
    await createPool(t, {
      name: 'aging',
      providerType: 'fake-retire',
      maxActiveInstances: 1,
      maxInstanceLifetimeSeconds: 3600,
      specifications: { enableTasks: ['noop'] },
    });
    const id = (await submitOk(t, noop)).id as string;
    await cycle();
    const name = cloud.launches[0].spec.agent.workerName;
    const token = await boot(0);
    const got = (await ok(t, REQUEST_WORK, {}, token)).requestWork.workRequest;
    expect(got.id).toBe(id);
    await t.sql(`update worker set instance_created_at = now() - interval '2 hours' where name = ?`, [name]);

    const busy = await cycle();
    expect(await workerOf(name)).toMatchObject({ draining: true, retiring_reason: 'LIFETIME', terminated: false });
    expect(busy.stopped).toBe(0); // it holds work
    await submitOk(t, noop);
    // Its own work runs to the end; the new request is not given to it.
    await ok(t, `mutation($id: ID!) { startWorkRequest(input: { id: $id }) { __typename } }`, { id }, token);
    await ok(
      t,
      `mutation($id: ID!) { completeWorkRequest(input: { id: $id, result: SUCCESS }) { __typename } }`,
      { id },
      token,
    );
    expect((await ok(t, REQUEST_WORK, {}, token)).requestWork.workRequest).toBeNull();

    const idle = await cycle();
    expect(idle.stopped).toBe(1);
    expect(await workerOf(name)).toMatchObject({ terminated: true });
    expect(cloud.launches).toHaveLength(2);
  });

  it('the rule in TypeScript and in SQL agree', async () => {
    const now = new Date('2026-06-01T12:00:00Z');
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 10 }),
        fc.option(fc.integer({ min: 1, max: 10 }), { nil: null }),
        fc.option(fc.integer({ min: -100, max: 7200 }), { nil: null }),
        fc.option(fc.integer({ min: 60, max: 3600 }), { nil: null }),
        async (assigned, limit, ageSeconds, lifetime) => {
          const created = ageSeconds === null ? null : new Date(now.getTime() - ageSeconds * 1000);
          const [row] = await t.sql<{ reached: boolean; outlived: boolean }>(
            `select ${reachedWorkRequestLimitSql('?::int', '?::int')} as reached, ${outlivedSql('?::timestamptz', '?::int', '?::timestamptz')} as outlived`,
            [limit, assigned, limit, created, lifetime, now, created, lifetime],
          );
          expect(row).toEqual({
            reached: reachedWorkRequestLimit(assigned, limit),
            outlived: outlived(created, lifetime, now),
          });
        },
      ),
      { numRuns: 100 },
    );
    // The request limit runs in PostgreSQL's trigger functions: those the migrations installed are the
    // rule module's (a change there without a migration that installs it fails here).
    const installed = await t.sql<{ proname: string; prosrc: string }>(
      `select proname, prosrc from pg_proc where proname in ('worker_assignment_count_insert', 'worker_assignment_count_update') order by proname`,
    );
    expect(
      installed.map(
        (f) => `create or replace function "${f.proname}"() returns trigger language plpgsql as $$${f.prosrc}$$;`,
      ),
    ).toEqual(
      assignmentCountFunctionsSql()
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((f) => f.sql),
    );
    // Outdated: an instance's kept fingerprint against its pool's now (none kept: not outdated in SQL, null in TypeScript).
    const pool = { providerType: 'hetzner', specifications: { image: 'sbuild-2', instanceType: 'cx22' } };
    for (const kept of [
      null,
      templateFingerprint(pool),
      templateFingerprint({ ...pool, specifications: { image: 'sbuild-1', instanceType: 'cx22' } }),
    ]) {
      const [row] = await t.sql<{ outdated: boolean }>(`select ${outdatedSql('?::text')} as outdated`, [
        kept,
        kept,
        templateFingerprint(pool),
      ]);
      expect(row.outdated).toBe(isOutdated(kept, pool) ?? false);
    }
  });
});
