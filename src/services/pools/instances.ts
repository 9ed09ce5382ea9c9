import { randomBytes } from 'node:crypto';
import { nextLaunchPrice } from '../../scheduler/rules/pool-cost.js';
import { instanceRoom, underCostBudget } from '../../scheduler/rules/pool-capacity.js';
import { committedCostOf } from '../../scheduler/storage/pool-runtime.js';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { Config } from '../../core/config/config.js';
import type { ProvidersConfig } from '../../core/config/providers.js';
import type { ProvisionerConfig } from '../../core/config/provisioner.js';
import type { TagsConfig } from '../../core/config/tags.js';
import { isLaunchingOrRunning, isLiveInstance } from '../../core/instance-state.js';
import { InstanceSchema, type Instance } from '../../storage/entities/instance.js';
import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import { WorkerSchema, type Worker } from '../../storage/entities/worker.js';
import { InvalidStateError, NotFoundError } from '../../core/errors.js';
import type { Events } from '../../storage/events.js';
import { isAdmin, requireAdmin, type Viewer } from '../identity/auth.js';
import { readInstanceLog, type InstanceLogTail } from '../../providers/instance-logs.js';
import { creating } from '../input/flush.js';
import { terminateWorkers } from '../workers/terminate.js';
import { issueToken } from '../identity/tokens.js';
import { nameSchema, parseInput } from '../input/validate.js';
import { refreshWorkerTags } from '../workers/worker-tags.js';
import { templateFingerprint } from '../../scheduler/rules/instance-retirement.js';
import { poolConcurrency } from '../../scheduler/rules/pool-capacity.js';

/** A new instance, as recorded before its provider is asked to start it. */
export interface LaunchRecord {
  readonly instance: Instance;
  readonly worker: Worker;
  /** The one-shot activation token bound to the worker, shown only here. */
  readonly activationToken: string;
}

/** A fresh instance name in a pool: its name and random hex, within the 100 characters of a worker name. */
export function newInstanceName(pool: string): string {
  return `${pool.slice(0, 90)}-${randomBytes(4).toString('hex')}`;
}

/**
 * Records a new instance of a pool before anyone starts it (docs/design.md: pools and instances): its worker (in the pool,
 * with the pool's concurrency and tags, `instanceCreatedAt` now), a one-shot activation token bound
 * to that worker, and the instance LAUNCHING under the worker's name. One transaction: a server that
 * stops after this and before the provider answers leaves a record that reconciliation finds.
 */
export async function recordLaunch(
  em: EntityManager,
  config: TagsConfig,
  pool: WorkerPool,
  now: Date,
  name: string = newInstanceName(pool.name),
): Promise<LaunchRecord> {
  return creating(`an instance or worker "${name}"`, () =>
    em.transactional((tx) => recordIn(tx, config, pool, now, name)),
  );
}

/** Why {@link recordBudgetedLaunch} recorded nothing. */
export type LaunchRefusal = 'lease' | 'instances' | 'budget' | 'gone';

/**
 * {@link recordLaunch} for the provisioner, fenced and within the pool's limits, all in its one
 * transaction: `fence` first (loops/provisioner/context.ts: the cycle's lease still held in its term, its
 * row then locked until commit, so that a process that lost the lease records nothing); then the pool's
 * row locked (so launches of one pool are recorded one at a time, whichever process records them); then
 * the pool's instance cap (scheduler/rules/pool-capacity.ts: instanceRoom, over the pool's workers not
 * terminated, as the demand counts them) and its monthly cost budget (the committed cost this month, every
 * launch recorded before this one counted: scheduler/rules/pool-cost.ts, checked by underCostBudget). A
 * refusal, with nothing written, says which stopped it.
 */
export async function recordBudgetedLaunch(
  em: EntityManager,
  config: TagsConfig,
  pool: WorkerPool,
  now: Date,
  fence: (tx: EntityManager) => Promise<boolean>,
  name: string = newInstanceName(pool.name),
): Promise<LaunchRecord | { refused: LaunchRefusal }> {
  return creating(`an instance or worker "${name}"`, () =>
    em.transactional(async (tx): Promise<LaunchRecord | { refused: LaunchRefusal }> => {
      if (!(await fence(tx))) return { refused: 'lease' };
      const [row] = await tx.execute<{ monthly_cost_budget: number | null; max_active_instances: number; n: number }[]>(
        `select p.monthly_cost_budget, p.max_active_instances,
                (select count(*)::int from worker w where w.pool_id = p.id and w.terminated_at is null) as n
           from worker_pool p where p.id = ? for no key update of p`,
        [pool.id],
      );
      if (!row) return { refused: 'gone' };
      if (instanceRoom(row.max_active_instances, row.n) === 0) return { refused: 'instances' };
      const budget = row.monthly_cost_budget == null ? null : Number(row.monthly_cost_budget);
      if (budget != null && !underCostBudget(budget, await committedCostOf(tx, pool.id))) return { refused: 'budget' };
      return recordIn(tx, config, pool, now, name);
    }),
  );
}

async function recordIn(
  tx: EntityManager,
  config: TagsConfig,
  pool: WorkerPool,
  now: Date,
  name: string,
): Promise<LaunchRecord> {
  // The pool may have been read elsewhere (the provisioner's cycle): referred to by id here.
  const ref = tx.getReference(WorkerPoolSchema, pool.id);
  const worker = tx.create(WorkerSchema, {
    name,
    type: 'worker',
    pool: ref,
    concurrency: poolConcurrency(pool.specifications),
    instanceCreatedAt: now,
  });
  refreshWorkerTags(worker, pool, config);
  const { value } = issueToken(tx, { kind: 'activation', pool: ref, worker, label: `activation of instance ${name}` });
  // Its price (scheduler/rules/pool-cost.ts): the first offering's a launch tries, else the pool's; the
  // provisioner sets the price of the offering that started it once its provider answers (cycle.ts).
  const pricePerHour = nextLaunchPrice(pool);
  const instance = tx.create(InstanceSchema, {
    name,
    pool: ref,
    worker,
    state: 'LAUNCHING',
    requestedAt: now,
    templateFingerprint: templateFingerprint(pool),
    pricePerHour,
  });
  await tx.flush();
  return { instance, worker, activationToken: value };
}

/** The hand-kept instance mutations are for sites that run their own provisioning script. */
function requireManualProvisioning(config: ProvisionerConfig): void {
  if (config.enabled) {
    throw new InvalidStateError(
      'the provisioner of this service launches and stops instances itself; record instances by hand only with TAGSCHED_PROVISIONER=off',
    );
  }
}

async function findInstance(em: EntityManager, name: string): Promise<Instance> {
  const instance = await em.findOne(InstanceSchema, { name });
  if (!instance) throw new NotFoundError(`input.name: no instance "${name}"`, 'input.name');
  return instance;
}

/**
 * With TAGSCHED_PROVISIONER=off, a site's script records an instance it is about to start: the
 * worker, its activation token (returned once, for the script to hand to the machine) and the
 * instance LAUNCHING, as the provisioner would. Admin only.
 */
export async function createInstance(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'provisioner' | 'tags'>,
  input: { pool: string; name?: string | null },
): Promise<LaunchRecord> {
  requireAdmin(viewer);
  requireManualProvisioning(config.provisioner);
  const pool = await em.findOne(WorkerPoolSchema, { name: input.pool });
  if (!pool) throw new NotFoundError(`input.pool: no worker pool "${input.pool}"`, 'input.pool');
  const name = input.name == null ? newInstanceName(pool.name) : parseInput(nameSchema, input.name, 'input.name');
  return recordLaunch(em, config.tags, pool, new Date(), name);
}

/** A site's script records the provider's id of an instance it started. Admin only. */
export async function recordInstanceLaunched(
  em: EntityManager,
  viewer: Viewer,
  config: ProvisionerConfig,
  input: { name: string; providerId: string },
): Promise<Instance> {
  requireAdmin(viewer);
  requireManualProvisioning(config);
  const providerId = parseInput(
    z
      .string()
      .min(1, 'must not be empty')
      .max(300)
      .regex(/^[^\u0000-\u001f\u007f]*$/, 'must not contain control characters'),
    input.providerId,
    'input.providerId',
  );
  const instance = await findInstance(em, input.name);
  if (!isLaunchingOrRunning(instance.state))
    throw new InvalidStateError(`instance "${instance.name}" is ${instance.state}`);
  instance.providerId = providerId;
  await em.flush();
  return instance;
}

/**
 * A site's script records that an instance is gone: TERMINATED (FAILED with the error, when one is
 * given), and its worker terminated, its work back to the queue. An instance already ended is
 * answered as it is. Admin only.
 */
export async function recordInstanceStopped(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'provisioner' | 'leases' | 'tags' | 'statistics'>,
  events: Events,
  input: { name: string; error?: string | null },
): Promise<Instance> {
  requireAdmin(viewer);
  requireManualProvisioning(config.provisioner);
  const error =
    input.error == null
      ? null
      : parseInput(
          z
            .string()
            .min(1)
            .max(2000)
            .regex(/^[^\u0000]*$/, 'must not contain NUL'),
          input.error,
          'input.error',
        );
  const instance = await findInstance(em, input.name);
  if (!isLiveInstance(instance.state)) return instance;
  const end = error ? ({ state: 'FAILED', error } as const) : ({ state: 'TERMINATED', error: null } as const);
  if (instance.worker) {
    await terminateWorkers(
      em,
      config,
      events,
      [instance.worker.id],
      error ? 'its instance failed' : 'its instance was stopped',
      end,
    );
  } else {
    await em.nativeUpdate(InstanceSchema, { id: instance.id }, { state: end.state, error, terminatedAt: new Date() });
  }
  return (await em.refresh(instance)) ?? instance;
}

/** An instance's log for an admin (instance-logs.ts); null for anyone else, and when there is none. */
export function instanceLogFor(
  viewer: Viewer,
  config: Pick<ProvidersConfig, 'instanceLogDir'>,
  name: string,
  tailBytes: number,
): InstanceLogTail | null {
  if (!isAdmin(viewer)) return null;
  return readInstanceLog(config.instanceLogDir, name, tailBytes);
}
