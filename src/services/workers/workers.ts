import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { Config } from '../../core/config/config.js';
import type { TagsConfig } from '../../core/config/tags.js';
import { TokenSchema } from '../../storage/entities/token.js';
import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import { WORKER_TYPES, WorkerSchema, type Worker, type WorkerType } from '../../storage/entities/worker.js';
import {
  AlreadyExistsError,
  ERROR_CODES,
  ForbiddenError,
  InputError,
  NotFoundError,
  UnauthenticatedError,
  type InputProblem,
} from '../../core/errors.js';
import type { Events } from '../../storage/events.js';
import type { WorkerMetadata } from '../../core/tags/worker-tags.js';
import { requireAdmin, requireWorker, type Viewer } from '../identity/auth.js';
import { findWorker } from './find-worker.js';
import { markInstanceRunning } from './instance-running.js';
import { markSeenReturning } from './presence.js';
import { issueToken } from '../identity/tokens.js';
import { nameSchema, parseInput, zodProblems } from '../input/validate.js';
import { staticMetadataProblems } from '../input/admin-input.js';
import { noteRequiredTags, refreshWorkerTags } from './worker-tags.js';
import { creating } from '../input/flush.js';
import { noteActivation } from '../identity/visibility.js';
import { poolConcurrency } from '../../scheduler/rules/pool-capacity.js';
import { MAX_SPEED_SCORE } from '../../core/tags/host-speed.js';

/** Metadata as clients send it (GraphQL input); stored in the Debusine-style `system:*` keys. */
export interface WorkerMetadataInput {
  architectures?: string[] | null;
  cpuCount?: number | null;
  cpuSpeed?: number | null;
  cpuSpeedAll?: number | null;
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
  cpuSpeed: z.number().int().nonnegative().max(MAX_SPEED_SCORE).nullish(),
  cpuSpeedAll: z.number().int().nonnegative().max(MAX_SPEED_SCORE).nullish(),
  totalPhysicalMemory: z.number().nonnegative().nullish(),
  diskFree: z.number().nonnegative().nullish(),
  executors: listOf(50),
  tools: listOf(200),
  tasks: z
    .array(z.object({ type: z.string().max(50), name: z.string().max(100), version: z.number().int().nonnegative() }))
    .max(500)
    .nullish(),
  providedTags: listOf(500),
  requiredTags: listOf(500),
});

/** Converts the GraphQL metadata input into stored metadata; only the keys that were given are set. */
export function toWorkerMetadata(input: WorkerMetadataInput, path: string): WorkerMetadata {
  return storedMetadata(parseInput(metadataInput, input, path));
}

/**
 * An admin's static metadata in its stored shape, or every problem of it at once: its shape, and each
 * tag the tag engine would refuse (admin-input.ts). `extra` are the problems of the rest of the input.
 */
function judgeStaticMetadata(
  input: WorkerMetadataInput,
  path: string,
  config: Pick<Config, 'input' | 'tags'>,
  extra: InputProblem[] = [],
): WorkerMetadata {
  const parsed = zodProblems(metadataInput, input, path);
  const metadata = parsed.data ? storedMetadata(parsed.data) : null;
  const problems = [...parsed.problems, ...(metadata ? staticMetadataProblems(metadata, path, config) : []), ...extra];
  if (problems.length) throw InputError.of(problems);
  return metadata!;
}

function storedMetadata(m: z.output<typeof metadataInput>): WorkerMetadata {
  const out: WorkerMetadata = {};
  if (m.architectures != null) out['system:architectures'] = m.architectures;
  if (m.cpuCount != null) out['system:cpu_count'] = m.cpuCount;
  if (m.cpuSpeed != null) out['system:cpu_speed'] = m.cpuSpeed;
  if (m.cpuSpeedAll != null) out['system:cpu_speed_all'] = m.cpuSpeedAll;
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

/** Input of registerWorker. */
export interface RegisterWorkerInput {
  name: string;
  type?: WorkerType | null;
  concurrency?: number | null;
  /** It shares its CPUs, memory and disk among its requests (a static worker; a pool worker takes its pool's setting). */
  offersResources?: boolean | null;
  pool?: string | null;
  staticMetadata?: WorkerMetadataInput | null;
}

/** Registers a worker and returns it with its token (shown once). Admin only. */
export async function registerWorker(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'input' | 'tags'>,
  input: RegisterWorkerInput,
): Promise<{ worker: Worker; token: string }> {
  requireAdmin(viewer);
  const name = parseInput(nameSchema, input.name, 'input.name');
  const type = parseInput(z.enum(WORKER_TYPES), input.type ?? 'worker', 'input.type');
  const staticMetadata = input.staticMetadata
    ? judgeStaticMetadata(input.staticMetadata, 'input.staticMetadata', config)
    : {};
  let pool: WorkerPool | null = null;
  if (input.pool) {
    pool = await em.findOne(WorkerPoolSchema, { name: input.pool });
    if (!pool) throw new NotFoundError(`input.pool: no worker pool "${input.pool}"`, 'input.pool');
  }
  // A pool worker takes its pool's concurrency unless told otherwise.
  const concurrency = parseInput(
    z.number().int().min(1).max(1024),
    input.concurrency ?? (pool ? poolConcurrency(pool.specifications) : 1),
    'input.concurrency',
  );
  if (await em.count(WorkerSchema, { name })) throw new AlreadyExistsError(`a worker "${name}" already exists`);
  const worker = em.create(WorkerSchema, {
    name,
    type,
    concurrency,
    offersResources: input.offersResources === true,
    pool,
    staticMetadata,
    instanceCreatedAt: pool ? new Date() : null,
  });
  refreshWorkerTags(worker, pool, config.tags);
  const { value } = issueToken(em, { kind: 'worker', worker, label: `worker ${name}` });
  await creating(`a worker "${name}"`, () => em.flush());
  await noteRequiredTags(em, worker.requiredTags);
  return { worker, token: value };
}

/**
 * Trades a one-shot activation token for a worker token. A token the provisioner made for an
 * instance is bound to the worker created with it: that worker is the one activated (a name, if
 * given, must be its name). A pool-wide token (createActivationToken) creates a new worker in the pool.
 */
export async function activateWorker(
  em: EntityManager,
  viewer: Viewer,
  config: TagsConfig,
  input: { name?: string | null },
): Promise<{ worker: Worker; token: string }> {
  if (viewer.kind === 'anonymous') throw new UnauthenticatedError();
  if (viewer.kind !== 'activation') throw new ForbiddenError('activateWorker needs an activation token');
  const tokenId = viewer.tokenId;
  // Claim the token with one conditional update: of concurrent uses of the same token, exactly one wins.
  const claim = (tx: EntityManager) =>
    tx.nativeUpdate(TokenSchema, { id: tokenId, usedAt: null, enabled: true }, { usedAt: new Date(), enabled: false });
  if (viewer.workerId !== null) {
    const workerId = viewer.workerId;
    return em.transactional(async (tx) => {
      const worker = await tx.findOneOrFail(WorkerSchema, { id: workerId });
      if (input.name != null && input.name !== worker.name) {
        throw new InputError(
          ERROR_CODES.INVALID_INPUT,
          `input.name: this activation token is for the worker "${worker.name}"`,
          'input.name',
        );
      }
      if ((await claim(tx)) === 0) throw new UnauthenticatedError('the activation token was already used');
      const { value } = issueToken(tx, { kind: 'worker', worker, label: `activated instance ${worker.name}` });
      await tx.flush();
      noteActivation(viewer, worker.id);
      return { worker, token: value };
    });
  }
  const pool = await em.findOneOrFail(WorkerPoolSchema, { id: viewer.pool.id });
  if (!pool.enabled)
    throw new ForbiddenError(`the worker pool "${pool.name}" is disabled: its activation tokens are refused`);
  const name = parseInput(nameSchema, input.name ?? `${pool.name}-${randomBytes(4).toString('hex')}`, 'input.name');
  if (await em.count(WorkerSchema, { name })) throw new AlreadyExistsError(`a worker "${name}" already exists`);
  return creating(`a worker "${name}"`, () =>
    em.transactional(async (tx) => {
      if ((await claim(tx)) === 0) throw new UnauthenticatedError('the activation token was already used');
      const worker = tx.create(WorkerSchema, {
        name,
        type: 'worker',
        pool,
        concurrency: poolConcurrency(pool.specifications),
        instanceCreatedAt: new Date(),
      });
      refreshWorkerTags(worker, pool, config);
      const { value } = issueToken(tx, { kind: 'worker', worker, label: `activated from pool ${pool.name}` });
      await tx.flush();
      noteActivation(viewer, worker.id);
      return { worker, token: value };
    }),
  );
}

/**
 * A worker reports its dynamic metadata: stored, tags recomputed, bad tags dropped and recorded, never
 * refused for them. Then it is seen as any call makes it (presence.ts: seenByCall).
 */
export async function reportWorkerMetadata(
  em: EntityManager,
  viewer: Viewer,
  config: TagsConfig,
  events: Events,
  input: { metadata: WorkerMetadataInput },
  stopping: boolean,
): Promise<Worker> {
  const reporter = requireWorker(viewer);
  reporter.dynamicMetadata = toWorkerMetadata(input.metadata, 'input.metadata');
  const now = new Date();
  reporter.metadataReportedAt = now;
  refreshWorkerTags(reporter, await loadPool(em, reporter), config);
  await em.flush();
  const worker = await markSeenReturning(em, reporter.id, now, stopping);
  if (worker.pool) await markInstanceRunning(em, worker.id, now);
  events.publish('workerChanged', { id: worker.id, name: worker.name });
  return worker;
}

/** Replaces a worker's static (admin) metadata and recomputes its tags. Admin only. */
export async function setWorkerStaticMetadata(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'input' | 'tags'>,
  events: Events,
  input: { name: string; metadata: WorkerMetadataInput; concurrency?: number | null; offersResources?: boolean | null },
): Promise<Worker> {
  requireAdmin(viewer);
  const worker = await findWorker(em, input.name, 'input.name');
  // Judged whole before anything changes: a refused input leaves the worker as it was.
  const concurrency =
    input.concurrency == null
      ? null
      : zodProblems(z.number().int().min(1).max(1024), input.concurrency, 'input.concurrency');
  const metadata = judgeStaticMetadata(input.metadata, 'input.metadata', config, concurrency?.problems ?? []);
  worker.staticMetadata = metadata;
  if (concurrency?.data != null) worker.concurrency = concurrency.data;
  if (input.offersResources != null) worker.offersResources = input.offersResources;
  refreshWorkerTags(worker, await loadPool(em, worker), config.tags);
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
  unquarantine: { quarantinedAt: null, quarantineReason: null },
} as const;

/** Flips one admin switch of a worker (drain, undrain, enable, disable, unquarantine). Admin only. */
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
