/**
 * The provisioning series of /metrics: launches, launch failures by reason and instance ends by
 * reason (this process's counters, from real provisioner cycles against the stand-in cloud of
 * test/provisioner/fake-cloud.ts), and the database gauges of each pool's health, limits and
 * runtime, the oldest pending request's age, and pending requests labelled by task and architecture.
 */
import type { PromData } from 'prom2javascript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMetrics } from '../helpers/metrics.js';
import { useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, sbuild, submitOk } from '../helpers/fixtures.js';
import { registerFakeCloud } from '../provisioner/fake-cloud.js';

const cloud = registerFakeCloud('fake-metrics');
afterAll(() => cloud.unregister());

const t = useTestApp({
  provisioner: {
    enabled: true,
    agentServerUrl: 'http://tagsched.test/graphql',
    launchBackoffMs: 3_600_000,
    launchBackoffMaxMs: 3_600_000,
  },
});
let base: string;

beforeAll(async () => {
  // Started for /metrics only: the provisioner's cycles are run by the test (its periodic one is an hour away).
  base = (await t.app.start()).url.replace(/\/graphql$/, '');
  await createWorkspace(t, 'metrics/prov');
});

async function scrape(): Promise<Record<string, { type: string; data: PromData[] }>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return (await parseMetrics(text)) as Record<string, { type: string; data: PromData[] }>;
}
const value = (m: Record<string, { data: PromData[] }>, name: string, labels: Record<string, string>) =>
  m[name]?.data.find((d) => Object.entries(labels).every(([k, v]) => d.labels[k] === v))?.value;

describe('provisioning metrics', () => {
  it('count launches and failures by reason, and show the pools’ health, limits and runtime', async () => {
    await createPool(t, {
      name: 'prov',
      providerType: 'fake-metrics',
      maxActiveInstances: 2,
      monthlyRuntimeBudgetSeconds: 7200,
      specifications: { enableTasks: ['sbuild'], architectures: ['amd64'], enableBackends: ['unshare'] },
    });
    const pendingFrom = Date.now();
    for (let i = 0; i < 3; i++) await submitOk(t, sbuild('metrics/prov', `pkg-${i}`));
    await t.app.provisioner.runCycle();
    expect(cloud.launches).toHaveLength(2);

    let m = await scrape();
    expect(value(m, 'tagsched_instance_launches_total', { pool: 'prov' })).toBe(2);
    expect(value(m, 'tagsched_pool_launch_limited', { pool: 'prov', limit: 'MAX_ACTIVE_INSTANCES' })).toBe(1);
    expect(value(m, 'tagsched_pool_launch_limited', { pool: 'prov', limit: 'BACKOFF' })).toBe(0);
    expect(value(m, 'tagsched_pool_degraded', { pool: 'prov' })).toBe(0);
    expect(value(m, 'tagsched_pool_month_runtime_budget_seconds', { pool: 'prov' })).toBe(7200);
    expect(value(m, 'tagsched_pool_month_runtime_seconds', { pool: 'prov' })).toBeGreaterThanOrEqual(0);
    expect(value(m, 'tagsched_pending_work_requests', { task: 'worker:sbuild', architecture: 'amd64' })).toBe(3);
    // The next sbuild waits for a launching instance: the pool's launch time (none measured yet: the default 300 s) from its launch.
    const wait = value(m, 'tagsched_estimated_wait_seconds', { task: 'worker:sbuild', architecture: 'amd64' })!;
    expect(wait).toBeGreaterThan(300 - (Date.now() - pendingFrom) / 1000 - 1);
    expect(wait).toBeLessThanOrEqual(300);
    expect(m.tagsched_start_estimate_error_seconds?.data ?? []).toEqual([]);
    const oldest = value(m, 'tagsched_oldest_pending_seconds', {})!;
    expect(oldest).toBeGreaterThan(0);
    expect(oldest).toBeLessThanOrEqual((Date.now() - pendingFrom) / 1000 + 1);

    // A capacity error: counted by reason; the pool backs off (an hour here) and says so.
    await t.sql(`update worker_pool set max_active_instances = 5 where name = 'prov'`);
    cloud.behaviour = { kind: 'fail', error: 'capacity', message: 'no capacity in fsn1' };
    await t.app.provisioner.runCycle();
    m = await scrape();
    expect(value(m, 'tagsched_instance_launch_failures_total', { pool: 'prov', reason: 'capacity' })).toBe(1);
    expect(value(m, 'tagsched_pool_launch_limited', { pool: 'prov', limit: 'BACKOFF' })).toBe(1);
    cloud.behaviour = { kind: 'ok' };
  });

  it('count instances ended by reason: lost by the provider', async () => {
    const [first] = [...cloud.instances.keys()];
    cloud.lose(first);
    // Launched long enough ago that a cloud's list no longer lags behind it (reconcile.ts).
    await t.sql(`update instance set requested_at = now() - interval '2 minutes'`);
    await t.app.provisioner.runCycle({ reconcile: true });
    expect(value(await scrape(), 'tagsched_instance_ends_total', { pool: 'prov', reason: 'lost' })).toBe(1);
  });

  it('say 0 for the oldest pending age when nothing is pending', async () => {
    await t.sql(`update work_request set status = 'ABORTED', completed_at = now() where status = 'PENDING'`);
    expect(value(await scrape(), 'tagsched_oldest_pending_seconds', {})).toBe(0);
  });
});
