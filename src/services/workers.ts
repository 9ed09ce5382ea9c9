import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { Config } from '../config.js';
import { TokenSchema } from '../entities/token.js';
import { WorkerPoolSchema, type WorkerPool } from '../entities/worker-pool.js';
import { WORKER_TYPES, WorkerSchema, type Worker, type WorkerType } from '../entities/worker.js';
import { AlreadyExistsError, ForbiddenError, NotFoundError, UnauthenticatedError } from '../errors.js';
import type { Events } from '../events.js';
import type { WorkerMetadata } from '../tags/worker-tags.js';
import { requireAdmin, requireWorker, type Viewer } from './auth.js';
import { issueToken } from './tokens.js';
import { nameSchema, parseInput } from './validate.js';
import { noteRequiredTags, refreshWorkerTags } from './worker-tags.js';
import { creating } from './flush.js';

/** Metadata as clients send it (GraphQL input); stored in the Debusine-style `system:*` keys. */
export interface WorkerMetadataInput {
  architectures?: string[] | null;
  cpuCount?: number | null;
  totalPhysicalMemory?: number | null;
  diskFree?: number | null;
  executors?: string[] | null;
  tools?: string[] | null;
  tasks?: { type: string; name: string; version: number }[] | null;
  providedTags?: string[] | null;
  requiredTags?: string[] | null;
}

const listOf = (max: number) => z.array(z.string().max(300)).max(max).nullish();
const metadataInput = z.object({
  architectures: listOf(50),
  cpuCount: z.number().int().nonnegative().nullish(),
  totalPhysicalMemory: z.number().nonnegative().nullish(),
  diskFree: z.number().nonnegative().nullish(),
  executors: listOf(50),
  tools: listOf(200),
  tasks: z.array(z.object({ type: z.string().max(50), name: z.string().max(100), version: z.number().int().nonnegative() })).max(500).nullish(),
  providedTags: listOf(500),
  requiredTags: listOf(500),
});

/** Converts the GraphQL metadata input into stored metadata; only the keys that were given are set. */
export function toWorkerMetadata(input: WorkerMetadataInput, path: string): WorkerMetadata {
  const m = parseInput(metadataInput, input, path);
  const out: WorkerMetadata = {};
  if (m.architectures != null) out['system:architectures'] = m.architectures;
  if (m.cpuCount != null) out['system:cpu_count'] = m.cpuCount;
  if (m.totalPhysicalMemory != null) out['system:total_physical_memory'] = m.totalPhysicalMemory;
  if (m.diskFree != null) out['system:disk_free'] = m.diskFree;
  if (m.executors != null) out['system:executors'] = m.executors;
  if (m.tools != null) out['system:tools'] = m.tools;
  if (m.tasks != null) out['system:tasks'] = m.tasks;
  if (m.providedTags != null) out.provided_tags = m.providedTags;
  if (m.requiredTags != null) out.required_tags = m.requiredTags;
  return out;
}

async function loadPool(em: EntityManager, worker: Worker): Promise<WorkerPool | null> {
  return worker.pool ? em.findOneOrFail(WorkerPoolSchema, { id: worker.pool.id }) : null;
}

/** Finds a worker by name (typed not-found error). */
export async function findWorker(em: EntityManager, name: string, path = 'name'): Promise<Worker> {
  const worker = await em.findOne(WorkerSchema, { name });
  if (!worker) throw new NotFoundError(`${path}: no worker "${name}"`, path);
  return worker;
}

/** Input of registerWorker. */
export interface RegisterWorkerInput {
  name: string;
  type?: WorkerType | null;
  concurrency?: number | null;
  pool?: string | null;
  staticMetadata?: WorkerMetadataInput | null;
}

/** Registers a worker and returns it with its token (shown once). Admin only. */
export async function registerWorker(
  em: EntityManager,
  viewer: Viewer,
  config: Config,
  input: RegisterWorkerInput,
): Promise<{ worker: Worker; token: string }> {
  requireAdmin(viewer);
  const name = parseInput(nameSchema, input.name, 'input.name');
  const type = parseInput(z.enum(WORKER_TYPES), input.type ?? 'worker', 'input.type');
  const concurrency = parseInput(z.number().int().min(1).max(1024), input.concurrency ?? 1, 'input.concurrency');
  const staticMetadata = input.staticMetadata ? toWorkerMetadata(input.staticMetadata, 'input.staticMetadata') : {};
  let pool: WorkerPool | null = null;
  if (input.pool) {
    pool = await em.findOne(WorkerPoolSchema, { name: input.pool });
    if (!pool) throw new NotFoundError(`input.pool: no worker pool "${input.pool}"`, 'input.pool');
  }
  if (await em.count(WorkerSchema, { name })) throw new AlreadyExistsError(`a worker "${name}" already exists`);
  const worker = em.create(WorkerSchema, { name, type, concurrency, pool, staticMetadata, instanceCreatedAt: pool ? new Date() : null });
  refreshWorkerTags(worker, pool, config);
  const { value } = issueToken(em, { kind: 'worker', worker, label: `worker ${name}` });
  await creating(`a worker "${name}"`, () => em.flush());
  await noteRequiredTags(em, worker.requiredTags);
  return { worker, token: value };
}

/** Trades a pool's one-shot activation token for a new worker in that pool and its worker token. */
export async function activateWorker(
  em: EntityManager,
  viewer: Viewer,
  config: Config,
  input: { name?: string | null },
): Promise<{ worker: Worker; token: string }> {
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  if (viewer.kind !== 'activation') throw new ForbiddenError('activateWorker needs an activation token');
  const pool = viewer.pool;
  const name = parseInput(nameSchema, input.name ?? `${pool.name}-${randomBytes(4).toString('hex')}`, 'input.name');
  if (await em.count(WorkerSchema, { name })) throw new AlreadyExistsError(`a worker "${name}" already exists`);
  const tokenId = viewer.tokenId;
  return creating(`a worker "${name}"`, () => em.transactional(async (tx) => {
    // Claim the token with one conditional update: of concurrent uses of the same token, exactly one wins.
    const claimed = await tx.nativeUpdate(TokenSchema, { id: tokenId, usedAt: null, enabled: true }, { usedAt: new Date(), enabled: false });
    if (claimed === 0) throw new UnauthenticatedError('the activation token was already used');
    const worker = tx.create(WorkerSchema, { name, type: 'worker', pool, instanceCreatedAt: new Date() });
    refreshWorkerTags(worker, pool, config);
    const { value } = issueToken(tx, { kind: 'worker', worker, label: `activated from pool ${pool.name}` });
    await tx.flush();
    return { worker, token: value };
  }));
}

/** A worker reports its dynamic metadata: stored, tags recomputed, bad tags dropped and recorded, never refused for them. */
export async function reportWorkerMetadata(
  em: EntityManager,
  viewer: Viewer,
  config: Config,
  events: Events,
  input: { metadata: WorkerMetadataInput },
): Promise<Worker> {
  const worker = requireWorker(viewer);
  worker.dynamicMetadata = toWorkerMetadata(input.metadata, 'input.metadata');
  const now = new Date();
  worker.lastSeenAt = now;
  worker.connectedAt ??= now;
  refreshWorkerTags(worker, await loadPool(em, worker), config);
  await em.flush();
  events.publish('workerChanged', { id: worker.id, name: worker.name });
  return worker;
}

/** Replaces a worker's static (admin) metadata and recomputes its tags. Admin only. */
export async function setWorkerStaticMetadata(
  em: EntityManager,
  viewer: Viewer,
  config: Config,
  events: Events,
  input: { name: string; metadata: WorkerMetadataInput; concurrency?: number | null },
): Promise<Worker> {
  requireAdmin(viewer);
  const worker = await findWorker(em, input.name, 'input.name');
  worker.staticMetadata = toWorkerMetadata(input.metadata, 'input.metadata');
  if (input.concurrency != null) worker.concurrency = parseInput(z.number().int().min(1).max(1024), input.concurrency, 'input.concurrency');
  refreshWorkerTags(worker, await loadPool(em, worker), config);
  await em.flush();
  await noteRequiredTags(em, worker.requiredTags);
  events.publish('workerChanged', { id: worker.id, name: worker.name });
  return worker;
}

/** The admin switches of a worker. */
export const WORKER_SWITCHES = {
  drain: { draining: true },
  undrain: { draining: false },
  enable: { enabled: true },
  disable: { enabled: false },
} as const;

/** Flips one admin switch of a worker (drain, undrain, enable, disable). Admin only. */
export async function switchWorker(
  em: EntityManager,
  viewer: Viewer,
  events: Events,
  name: string,
  change: keyof typeof WORKER_SWITCHES,
): Promise<Worker> {
  requireAdmin(viewer);
  const worker = await findWorker(em, name);
  Object.assign(worker, WORKER_SWITCHES[change]);
  await em.flush();
  events.publish('workerChanged', { id: worker.id, name: worker.name });
  return worker;
}
