/**
 * The provisioner's lease and its fence (docs/operating/replicas.md, "Leadership"), through the real
 * cycle of two apps on one database and an exec pool whose launch takes a while: a process whose lease
 * another process took while it launched records no further launch (the term is checked in the
 * transaction that records each one), and a cycle that planned more launches than the pool's cap
 * still has room for stops at the cap (counted again in that transaction).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp, type App } from '../../src/server/app.js';
import { createLogger } from '../../src/core/log.js';
import { recordLaunch } from '../../src/services/pools/instances.js';
import { WorkerPoolSchema } from '../../src/storage/entities/worker-pool.js';
import { secondAppConfig, useTestApp } from '../helpers/app.js';
import { createPool, createWorkspace, submitOk } from '../helpers/fixtures.js';

// An exec launcher that takes 700 ms, writes each launch's instance name to a file, and answers a fresh id.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-fence-'));
const LAUNCHES = path.join(dir, 'launches');
const LAUNCHER = path.join(dir, 'launch.sh');
fs.writeFileSync(
  LAUNCHER,
  `#!/bin/sh\ninput=$(cat)\nsleep 0.7\necho "$input" | sed -n 's/.*"name":"\\([^"]*\\)".*/\\1/p' | head -n1 >> ${LAUNCHES}\necho "{\\"id\\":\\"ex-$$\\"}"\n`,
  { mode: 0o755 },
);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const settings = {
  provisioner: { enabled: true, agentServerUrl: 'http://tagsched.test/graphql' },
  providers: { execCommands: [LAUNCHER] },
};
const a = useTestApp(settings);
let b: App;

beforeAll(async () => {
  b = await buildApp(secondAppConfig(a, settings), { log: createLogger('silent') });
  await createWorkspace(a, 'fence/ws');
});
afterAll(async () => {
  await b?.stop();
});
beforeEach(async () => {
  await a.sql(`update work_request set status = 'ABORTED', completed_at = now() where status = 'PENDING'`);
  await a.sql(`update worker_pool set enabled = false`);
  // The instances of earlier tests never connect: they would be counted as workers on their way.
  await a.sql(`update worker set terminated_at = now() where terminated_at is null`);
  await a.sql(`update instance set state = 'TERMINATED', terminated_at = now() where terminated_at is null`);
  fs.rmSync(LAUNCHES, { force: true });
});

const noop = { workspace: 'fence/ws', taskType: 'worker', taskName: 'noop', taskData: {} };
const instancesOf = (pool: string) =>
  a.sql<{ name: string; state: string }>(
    `select i.name, i.state from instance i join worker_pool p on p.id = i.pool_id where p.name = ? order by i.id`,
    [pool],
  );
const launched = () => (fs.existsSync(LAUNCHES) ? fs.readFileSync(LAUNCHES, 'utf8').trim().split('\n') : []);
const until = async (check: () => Promise<boolean>, ms = 20_000) => {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
};

describe('the provisioner’s lease', () => {
  it('one process leads at a time: the other’s cycle is skipped while the lease is held', async () => {
    await createPool(a, {
      name: 'solo',
      providerType: 'exec',
      maxActiveInstances: 1,
      specifications: { command: [LAUNCHER], enableTasks: ['noop'] },
    });
    await submitOk(a, noop);
    await submitOk(a, noop);
    expect(await a.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 1 });
    // B's cycle is skipped: A holds the leases (null: B leads no duty).
    expect(await b.provisioner.runCycle({ reconcile: false })).toBeNull();
    expect(await instancesOf('solo')).toHaveLength(1);
    const [lease] = await a.sql<{ holder: string; term: string }>(
      `select holder, term from leader_lease where duty = 'provisioner'`,
    );
    expect(lease.holder).toBe(a.app.config.server.processName);
  });

  it('a lease taken by another process while its holder launches: no launch past the demand (6 requests, 6 launches)', async () => {
    await createPool(a, {
      name: 'slow',
      providerType: 'exec',
      maxActiveInstances: 20,
      specifications: { command: [LAUNCHER], enableTasks: ['noop'] },
    });
    for (let i = 0; i < 6; i++) await submitOk(a, noop);
    // A leads and starts launching its six, one after the other.
    const aCycle = a.app.provisioner.runCycle({ reconcile: false });
    await until(async () => (await instancesOf('slow')).length >= 1);
    // A's lease expires under it (as when it was paused, or its host was cut off), and B takes it.
    await a.sql(`update leader_lease set expires_at = now() - interval '1 second' where duty = 'provisioner'`);
    const bReport = await b.provisioner.runCycle({ reconcile: false });
    const aReport = await aCycle;
    expect(bReport).not.toBeNull();
    // A launched the one it had recorded before it lost the lease and nothing after; B the rest.
    expect(aReport!.launched + bReport!.launched).toBe(6);
    expect(aReport!.launched).toBeLessThan(6);
    expect(await instancesOf('slow')).toHaveLength(6);
    expect(launched()).toHaveLength(6);
    const [lease] = await a.sql<{ holder: string; term: string }>(
      `select holder, term from leader_lease where duty = 'provisioner'`,
    );
    expect(lease.holder).toBe(b.config.server.processName);
    // A's next cycle skips the cloud pools: B holds their lease (A may lead this host's duty, which has no pool here).
    await submitOk(a, noop);
    expect(await a.app.provisioner.runCycle({ reconcile: false })).toMatchObject({ launched: 0 });
    expect(await instancesOf('slow')).toHaveLength(6);
    await a.sql(`update leader_lease set expires_at = now() - interval '1 second' where duty = 'provisioner'`);
  });

  it('a cycle that planned more launches than its pool still has room for stops at maxActiveInstances', async () => {
    await createPool(a, {
      name: 'capped',
      providerType: 'exec',
      maxActiveInstances: 6,
      specifications: { command: [LAUNCHER], enableTasks: ['noop'] },
    });
    for (let i = 0; i < 6; i++) await submitOk(a, noop);
    const cycle = a.app.provisioner.runCycle({ reconcile: false });
    await until(async () => (await instancesOf('capped')).length >= 1);
    // Meanwhile three more instances of the pool are recorded elsewhere (its demand was planned before them).
    const pool = await a.app.orm.em.fork().findOneOrFail(WorkerPoolSchema, { name: 'capped' });
    for (let i = 0; i < 3; i++) await recordLaunch(a.app.orm.em.fork(), a.app.config.tags, pool, new Date());
    const report = await cycle;
    expect(await instancesOf('capped')).toHaveLength(6);
    expect(report!.launched).toBe(3);
  });
});
