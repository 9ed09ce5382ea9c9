import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { Config } from '../config.js';
import { PROVIDER_TYPES, WorkerPoolSchema, type WorkerPool } from '../entities/worker-pool.js';
import { WorkerSchema } from '../entities/worker.js';
import { AlreadyExistsError, NotFoundError } from '../errors.js';
import type { Events } from '../events.js';
import { requireAdmin, type Viewer } from './auth.js';
import type { SecretBox } from './secrets.js';
import { issueToken } from './tokens.js';
import { checkTags, nameSchema, parseInput } from './validate.js';
import { noteRequiredTags, refreshWorkerTags } from './worker-tags.js';
import { creating } from './flush.js';

/** Input of createWorkerPool and updateWorkerPool; on update, omitted fields keep their value. */
export interface WorkerPoolInput {
  name: string;
  providerType?: string | null;
  providerAccount?: unknown;
  specifications?: unknown;
  providedTags?: string[] | null;
  requiredTags?: string[] | null;
  maxActiveInstances?: number | null;
  minIdleInstances?: number | null;
  idleTimeoutSeconds?: number | null;
  targetLatencySeconds?: number | null;
  monthlyRuntimeBudgetSeconds?: number | null;
  enabled?: boolean | null;
}

const specificationsSchema = z
  .object({
    cpuCount: z.number().int().positive().optional(),
    memoryGib: z.number().positive().optional(),
    diskGib: z.number().positive().optional(),
    image: z.string().max(500).optional(),
    instanceType: z.string().max(200).optional(),
  })
  .catchall(z.union([z.string().max(1000), z.number(), z.boolean()]));

const limitsSchema = z.object({
  maxActiveInstances: z.number().int().min(0).max(100_000).nullish(),
  minIdleInstances: z.number().int().min(0).max(100_000).nullish(),
  idleTimeoutSeconds: z.number().int().min(0).nullish(),
  targetLatencySeconds: z.number().int().min(1).nullish(),
  monthlyRuntimeBudgetSeconds: z.number().int().min(0).nullish(),
});

// The provider account is a JSON object of credentials; it is only ever written, never read back.
const providerAccountSchema = z.record(z.string(), z.unknown());

function applyPoolInput(pool: WorkerPool, input: WorkerPoolInput, config: Config, secrets: SecretBox): void {
  if (input.providerType != null) pool.providerType = parseInput(z.enum(PROVIDER_TYPES), input.providerType, 'input.providerType');
  if (input.providerAccount != null) {
    const account = parseInput(providerAccountSchema, input.providerAccount, 'input.providerAccount');
    pool.providerAccountEncrypted = secrets.seal(JSON.stringify(account));
  }
  if (input.specifications != null) pool.specifications = parseInput(specificationsSchema, input.specifications, 'input.specifications');
  if (input.providedTags != null) {
    checkTags([input.providedTags, 'provided', 'input.providedTags', config.maxTagsPerSet]);
    pool.providedTags = input.providedTags;
  }
  if (input.requiredTags != null) {
    checkTags([input.requiredTags, 'required', 'input.requiredTags', config.maxTagsPerSet]);
    pool.requiredTags = input.requiredTags;
  }
  const limits = parseInput(limitsSchema, input, 'input');
  if (limits.maxActiveInstances != null) pool.maxActiveInstances = limits.maxActiveInstances;
  if (limits.minIdleInstances != null) pool.minIdleInstances = limits.minIdleInstances;
  if (limits.idleTimeoutSeconds != null) pool.idleTimeoutSeconds = limits.idleTimeoutSeconds;
  if (limits.targetLatencySeconds != null) pool.targetLatencySeconds = limits.targetLatencySeconds;
  if (input.monthlyRuntimeBudgetSeconds !== undefined) pool.monthlyRuntimeBudgetSeconds = limits.monthlyRuntimeBudgetSeconds ?? null;
  if (input.enabled != null) pool.enabled = input.enabled;
}

/** Creates a worker pool. Admin only. */
export async function createWorkerPool(
  em: EntityManager,
  viewer: Viewer,
  config: Config,
  secrets: SecretBox,
  input: WorkerPoolInput,
): Promise<WorkerPool> {
  requireAdmin(viewer);
  const name = parseInput(nameSchema, input.name, 'input.name');
  if (await em.count(WorkerPoolSchema, { name })) throw new AlreadyExistsError(`a worker pool "${name}" already exists`);
  const pool = em.create(WorkerPoolSchema, { name, providerType: 'local' });
  applyPoolInput(pool, input, config, secrets);
  await creating(`a worker pool "${name}"`, () => em.flush());
  await noteRequiredTags(em, pool.requiredTags);
  return pool;
}

/** Changes a worker pool; its workers' tags are recomputed when its tags or specifications change. Admin only. */
export async function updateWorkerPool(
  em: EntityManager,
  viewer: Viewer,
  config: Config,
  secrets: SecretBox,
  events: Events,
  input: WorkerPoolInput,
): Promise<WorkerPool> {
  requireAdmin(viewer);
  const pool = await em.findOne(WorkerPoolSchema, { name: input.name });
  if (!pool) throw new NotFoundError(`input.name: no worker pool "${input.name}"`, 'input.name');
  applyPoolInput(pool, input, config, secrets);
  const workers = await em.find(WorkerSchema, { pool });
  for (const worker of workers) refreshWorkerTags(worker, pool, config);
  await em.flush();
  await noteRequiredTags(em, pool.requiredTags);
  for (const worker of workers) events.publish('workerChanged', { id: worker.id, name: worker.name });
  return pool;
}

/** Issues a one-shot activation token for a new instance of the pool (shown once). Admin only. */
export async function createActivationToken(em: EntityManager, viewer: Viewer, poolName: string): Promise<string> {
  requireAdmin(viewer);
  const pool = await em.findOne(WorkerPoolSchema, { name: poolName });
  if (!pool) throw new NotFoundError(`pool: no worker pool "${poolName}"`, 'pool');
  const { value } = issueToken(em, { kind: 'activation', pool, label: `activation for pool ${pool.name}` });
  await em.flush();
  return value;
}
