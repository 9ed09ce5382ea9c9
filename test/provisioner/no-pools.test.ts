/**
 * A site without pools (static workers only): the provisioner's cycles have nothing to do, and do not
 * read every worker's state for a demand no pool would serve.
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, connectedWorker, submitOk } from '../helpers/fixtures.js';

const t = useTestApp({ provisioner: { enabled: true } }); // cycles run by the test, one by one

describe('the provisioner on a site without pools', () => {
  it('does nothing and reads no worker, until a pool exists', async () => {
    await createWorkspace(t, 'debian/main');
    await connectedWorker(t, 'static-1');
    await submitOk(t, { workspace: 'debian/main', taskType: 'worker', taskName: 'noop', taskData: {} });
    const snapshot = t.app.scheduler.workers;
    const before = snapshot.shapesRead;
    const report = await t.app.provisioner.runCycle({ reconcile: true });
    expect(report).toEqual({
      reconciled: true,
      lost: 0,
      adopted: 0,
      strays: 0,
      failed: 0,
      stopsPursued: 0,
      launched: 0,
      launchFailures: 0,
      stopped: 0,
    });
    expect(snapshot.shapesRead).toBe(before);
    // With a pool, the same cycle reads the workers for its demand (so the count above could move).
    await createPool(t, { name: 'idle-local', maxActiveInstances: 0, specifications: { enableTasks: ['noop'] } });
    await t.app.provisioner.runCycle({ reconcile: false });
    expect(snapshot.shapesRead).toBeGreaterThan(before);
  });
});
