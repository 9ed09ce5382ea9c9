/**
 * Passes across two server processes on one database (docs/operating/replicas.md, "What runs where"):
 * a change is passed for by the process that made it and by the leader of the chores, not by every
 * process that hears it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/server/app.js';
import { harnessOn, startSecondApp, useTestApp } from '../helpers/app.js';
import { createWorkspace, sbuild, submitOk } from '../helpers/fixtures.js';

// No periodic pass in the time of a test: every pass counted is one a change asked for.
const settings = { serverWorkers: { count: 0 }, scheduler: { automatic: true, passIntervalMs: 3_600_000 } };
const t = useTestApp(settings);
// Two started processes (the harness's own app serves operations but runs no loops): A started first
// and leads the chores, B does not.
let a: App;
let b: App;

beforeAll(async () => {
  a = await startSecondApp(t, settings);
  b = await startSecondApp(t, settings);
  await createWorkspace(t, 'debian/passes');
  const until = Date.now() + 10_000;
  while (!(a.leadership.held('chores') && b.leadership.held('chores') === null)) {
    if (Date.now() > until) throw new Error('the first process does not lead the chores');
    await new Promise((r) => setTimeout(r, 50));
  }
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

/** The passes a process ran because a change asked for them (new pending work, a worker's change). */
async function changePasses(app: App): Promise<number> {
  const text = await app.metrics.registry.getSingleMetricAsString('tagsched_scheduler_passes_total');
  let n = 0;
  for (const m of text.matchAll(/^tagsched_scheduler_passes_total\{reason="(new-pending|worker-changed)"\} (\d+)$/gm))
    n += Number(m[2]);
  return n;
}

/** Waits until both processes' counts have stood still for a while; their counts. */
async function settled(): Promise<[number, number]> {
  let last = [-1, -1];
  for (;;) {
    await new Promise((r) => setTimeout(r, 400));
    const now = [await changePasses(a), await changePasses(b)];
    if (now[0] === last[0] && now[1] === last[1]) return now as [number, number];
    last = now;
  }
}

describe('passes across processes', () => {
  it('a change made by the chores leader is passed for there only', async () => {
    const [a0, b0] = await settled();
    // An sbuild no worker can run: it stays pending, so each pass asked for is run and counted.
    await submitOk(harnessOn(t, a), sbuild('debian/passes', 'one'));
    const [a1, b1] = await settled();
    expect(a1).toBeGreaterThan(a0);
    expect(b1).toBe(b0);
  });

  it('a change made by another process is passed for there and by the chores leader', async () => {
    const [a0, b0] = await settled();
    await submitOk(harnessOn(t, b), sbuild('debian/passes', 'two'));
    const [a1, b1] = await settled();
    expect(b1).toBeGreaterThan(b0);
    expect(a1).toBeGreaterThan(a0);
  });
});
