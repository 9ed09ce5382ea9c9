import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import type { Config } from '../../core/config/config.js';
import type { WorkersConfig } from '../../core/config/workers.js';
import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import { WEEKDAYS } from '../../shared/warm-schedule.js';
import { isTimeZone, minutesOf, WARM_PERIODS_MAX } from '../../scheduler/rules/scale-in.js';
import { WorkerSchema } from '../../storage/entities/worker.js';
import {
  AlreadyExistsError,
  ERROR_CODES,
  InputError,
  InvalidStateError,
  NotFoundError,
  type InputProblem,
} from '../../core/errors.js';
import type { Token } from '../../storage/entities/token.js';
import { hostBound, poolProviderProblems, providerTypes } from '../../providers/registry.js';
import { LIVE_INSTANCE_STATES } from '../../core/instance-state.js';
import { InstanceSchema } from '../../storage/entities/instance.js';
import type { Events } from '../../storage/events.js';
import { requireAdmin, type Viewer } from '../identity/auth.js';
import type { SecretBox } from '../identity/secrets.js';
import { issueToken } from '../identity/tokens.js';
import { handlerProblems, specificationProblems, withHandlerDefaults } from './pool-specifications.js';
import { nameSchema, oneOf, parseInput, zodProblems } from '../input/validate.js';
import { poolTagProblems } from '../input/admin-input.js';
import { noteRequiredTags, refreshWorkerTags } from '../workers/worker-tags.js';
import { creating } from '../input/flush.js';
import type { WorkerImage } from '../../storage/entities/worker-image.js';
import { findWorkerImage, imageNameOf, poolImageProblems } from './worker-images.js';
import { poolPublicationProblems, publishedPlaces, type PublishedPlace } from './publications.js';
import { poolConcurrency } from '../../scheduler/rules/pool-capacity.js';
import { isPricePerHour, MAX_MONTHLY_COST_BUDGET, PRICE_PER_HOUR_RANGE } from '../../scheduler/rules/pool-cost.js';

/** Input of createWorkerPool and updateWorkerPool; on update, omitted fields keep their value. */
export interface WorkerPoolInput {
  name: string;
  providerType?: string | null;
  /** A host-bound pool's host (scheduler/rules/pool-host.ts); null or omitted keeps it (on create: this process's host). */
  host?: string | null;
  providerAccount?: unknown;
  specifications?: unknown;
  providedTags?: string[] | null;
  requiredTags?: string[] | null;
  maxActiveInstances?: number | null;
  minIdleInstances?: number | null;
  idleTimeoutSeconds?: number | null;
  targetLatencySeconds?: number | null;
  monthlyRuntimeBudgetSeconds?: number | null;
  maxInstanceLifetimeSeconds?: number | null;
  maxWorkRequestsPerInstance?: number | null;
  maxReplacingInstances?: number | null;
  billingPeriodSeconds?: number | null;
  scaleDownDelaySeconds?: number | null;
  maxLaunchesPerMinute?: number | null;
  warmSchedule?: unknown;
  pricePerHour?: number | null;
  monthlyCostBudget?: number | null;
  enabled?: boolean | null;
}

const limitsSchema = z.object({
  maxActiveInstances: z.number().int().min(0).max(100_000).nullish(),
  minIdleInstances: z.number().int().min(0).max(100_000).nullish(),
  idleTimeoutSeconds: z.number().int().min(0).nullish(),
  targetLatencySeconds: z.number().int().min(1).nullish(),
  monthlyRuntimeBudgetSeconds: z.number().int().min(0).nullish(),
  // A minute at least: an instance takes longer than that to boot and take work. A year at most.
  maxInstanceLifetimeSeconds: z
    .number()
    .int()
    .min(60)
    .max(366 * 24 * 3600)
    .nullish(),
  maxWorkRequestsPerInstance: z.number().int().min(1).max(1_000_000).nullish(),
  maxReplacingInstances: z.number().int().min(1).max(100_000).nullish(),
  billingPeriodSeconds: z
    .number()
    .int()
    .min(60)
    .max(31 * 24 * 3600)
    .nullish(),
  // A day at most: a pool's recent launches are read over the last day (scheduler/storage/pool-launches.ts).
  scaleDownDelaySeconds: z
    .number()
    .int()
    .min(0)
    .max(24 * 3600)
    .nullish(),
  maxLaunchesPerMinute: z.number().int().min(1).max(10_000).nullish(),
  // Cost (scheduler/rules/pool-cost.ts): in the site's currency.
  pricePerHour: z.number().refine(isPricePerHour, PRICE_PER_HOUR_RANGE).nullish(),
  monthlyCostBudget: z.number().finite().min(0).max(MAX_MONTHLY_COST_BUDGET).nullish(),
  warmSchedule: z
    .object({
      timeZone: z.string().max(100).refine(isTimeZone, 'must be an IANA time zone, such as Europe/Berlin or UTC'),
      periods: z
        .array(
          z
            .object({
              days: z.array(z.enum(WEEKDAYS)).min(1, 'must name a day at least').max(7),
              from: z
                .string()
                .refine((v) => minutesOf(v) !== null && minutesOf(v)! < 24 * 60, 'must be a time of day, HH:MM'),
              to: z.string().refine((v) => minutesOf(v) !== null, 'must be a time of day, HH:MM, up to 24:00'),
              minIdleInstances: z.number().int().min(0).max(100_000),
            })
            .refine((p) => (minutesOf(p.to) ?? 0) > (minutesOf(p.from) ?? 0), {
              message: 'to must come after from (a period over midnight is two periods)',
              path: ['to'],
            }),
        )
        .max(WARM_PERIODS_MAX),
    })
    .nullish(),
});

// The provider account is a JSON object of credentials; it is only ever written, never read back.
const providerAccountSchema = z.record(z.string(), z.unknown());

// A host name as TAGSCHED_HOST_NAME takes it (core/config/server.ts).
const hostSchema = z
  .string()
  .regex(/^[\x21-\x7e]{1,100}$/, 'must be 1 to 100 printable ASCII characters without spaces, as TAGSCHED_HOST_NAME');

/**
 * What is wrong with the host the input gives a pool whose provider will be `type`: a host for a
 * provider that is not host-bound, a malformed name, or a new host while the pool has live instances
 * (they run, and are listed, on the host they were launched on).
 */
function hostProblems(pool: WorkerPool, type: string, host: string | null | undefined, liveInstances: number) {
  if (host == null) return [];
  const problem = (message: string): InputProblem => ({
    code: ERROR_CODES.INVALID_INPUT,
    message: `input.host: ${message}`,
    path: 'input.host',
    tag: null,
  });
  if (!hostBound(type)) {
    const bound = providerTypes().filter(hostBound).join(', ');
    return [problem(`${type} pools run on any host; only pools of a host-bound provider (${bound}) have one`)];
  }
  const parsed = zodProblems(hostSchema, host, 'input.host');
  if (parsed.problems.length) return parsed.problems;
  if (pool.host != null && host !== pool.host && liveInstances > 0)
    return [
      problem(
        `the pool has ${liveInstances} live instance${liveInstances === 1 ? '' : 's'} on host ${pool.host}: let ${liveInstances === 1 ? 'it' : 'them'} stop first (maxActiveInstances 0, or enabled false)`,
      ),
    ];
  return [];
}

/**
 * Judges a pool input whole (admin-input.ts) and, when nothing is wrong, applies it; otherwise it
 * throws one InputError with every problem, the pool unchanged: provider, account, specifications,
 * each tag the tag engine would refuse, the limits, and what the pool's provider finds wrong with
 * its name, specifications and account (src/providers/registry.ts).
 */
function applyPoolInput(
  pool: WorkerPool,
  input: WorkerPoolInput,
  image: WorkerImage | null,
  published: readonly PublishedPlace[],
  config: Pick<Config, 'input' | 'tags' | 'providers' | 'server'>,
  secrets: SecretBox,
  creating: boolean,
  liveInstances = 0,
): void {
  const providerType =
    input.providerType == null
      ? null
      : zodProblems(oneOf(providerTypes() as [string, ...string[]]), input.providerType, 'input.providerType');
  const account =
    input.providerAccount == null
      ? null
      : zodProblems(providerAccountSchema, input.providerAccount, 'input.providerAccount');
  const specifications =
    input.specifications == null ? null : specificationProblems(input.specifications, 'input.specifications');
  const limits = zodProblems(limitsSchema, input, 'input');
  // The pool as it would be: its provider, and its specifications (typed: pool-specifications.ts).
  const type = providerType?.data ?? pool.providerType;
  const specs = withHandlerDefaults(type, specifications?.data ?? pool.specifications ?? {});
  // A pool names its provider: without one it used to run local processes on the server's host.
  const missingProvider: InputProblem[] =
    creating && input.providerType == null
      ? [
          {
            code: ERROR_CODES.INVALID_INPUT,
            message: `input.providerType: required: one of ${providerTypes().join(', ')} (local runs agents as processes on the server's host)`,
            path: 'input.providerType',
            tag: null,
          },
        ]
      : [];
  const problems = [
    ...missingProvider,
    ...(providerType?.problems ?? []),
    ...(providerType?.problems.length ? [] : hostProblems(pool, type, input.host, liveInstances)),
    ...(account?.problems ?? []),
    ...(specifications?.problems ?? []),
    ...handlerProblems(type, specifications?.data ?? {}, 'input.specifications'),
    ...(specifications?.data ? poolImageProblems(specifications.data, image, 'input.specifications') : []),
    ...poolTagProblems(
      {
        name: pool.name,
        providedTags: input.providedTags,
        requiredTags: input.requiredTags,
        specifications: specifications?.data ?? null,
      },
      config,
    ),
    ...limits.problems,
  ];
  // The provider judges the pool as it would be; the stored account again only when the pool changes
  // provider (it was judged when given).
  if (!providerType?.problems.length && !account?.problems.length && !specifications?.problems.length) {
    const changedType = creating || type !== pool.providerType;
    const checkedAccount = account?.data ?? (changedType ? storedAccount(pool, secrets) : undefined);
    const poolImage =
      image && imageNameOf(specs) === image.name ? { name: image.name, manifest: image.manifest } : null;
    problems.push(
      ...poolProviderProblems(
        type,
        { name: pool.name, specifications: specs, account: checkedAccount, image: poolImage },
        config.providers,
      ),
    );
    // A pool that boots its image's published id: the image must be published where the pool launches.
    const regionAccount =
      account?.data ?? (checkedAccount === undefined ? storedAccount(pool, secrets) : checkedAccount);
    problems.push(...poolPublicationProblems(type, specs, published, regionAccount, 'input.specifications'));
  }
  if (problems.length) throw InputError.of(problems);
  // A host-bound pool runs on the host given, else keeps its own, else (new, or new to a host-bound
  // provider) runs on the host of the process that makes it; any other pool runs anywhere.
  if (!hostBound(type)) pool.host = null;
  else if (input.host != null) pool.host = input.host;
  else if (creating || !hostBound(pool.providerType)) pool.host = config.server.hostName;
  if (providerType?.data) pool.providerType = providerType.data;
  if (account?.data) pool.providerAccountEncrypted = secrets.seal(JSON.stringify(account.data));
  pool.specifications = specs;
  // Images never change once registered: the pool keeps a copy of its image's tags (worker-images.ts).
  if (specifications?.data) pool.imageTags = image ? image.manifest.tags.map((t) => t.tag) : null;
  if (input.providedTags != null) pool.providedTags = input.providedTags;
  if (input.requiredTags != null) pool.requiredTags = input.requiredTags;
  const l = limits.data!;
  if (l.maxActiveInstances != null) pool.maxActiveInstances = l.maxActiveInstances;
  if (l.minIdleInstances != null) pool.minIdleInstances = l.minIdleInstances;
  if (l.idleTimeoutSeconds != null) pool.idleTimeoutSeconds = l.idleTimeoutSeconds;
  if (l.targetLatencySeconds != null) pool.targetLatencySeconds = l.targetLatencySeconds;
  if (input.monthlyRuntimeBudgetSeconds !== undefined)
    pool.monthlyRuntimeBudgetSeconds = l.monthlyRuntimeBudgetSeconds ?? null;
  // null removes the limit; omitted keeps it.
  if (input.maxInstanceLifetimeSeconds !== undefined)
    pool.maxInstanceLifetimeSeconds = l.maxInstanceLifetimeSeconds ?? null;
  if (input.maxWorkRequestsPerInstance !== undefined)
    pool.maxWorkRequestsPerInstance = l.maxWorkRequestsPerInstance ?? null;
  if (l.maxReplacingInstances != null) pool.maxReplacingInstances = l.maxReplacingInstances;
  if (input.billingPeriodSeconds !== undefined) pool.billingPeriodSeconds = l.billingPeriodSeconds ?? null;
  if (input.scaleDownDelaySeconds !== undefined) pool.scaleDownDelaySeconds = l.scaleDownDelaySeconds ?? null;
  if (input.maxLaunchesPerMinute !== undefined) pool.maxLaunchesPerMinute = l.maxLaunchesPerMinute ?? null;
  if (input.warmSchedule !== undefined)
    pool.warmSchedule = l.warmSchedule ? { timeZone: l.warmSchedule.timeZone, periods: l.warmSchedule.periods } : null;
  if (input.pricePerHour !== undefined) pool.pricePerHour = l.pricePerHour ?? null;
  if (input.monthlyCostBudget !== undefined) pool.monthlyCostBudget = l.monthlyCostBudget ?? null;
  if (input.enabled != null) pool.enabled = input.enabled;
}

/** The registered image the pool will name (the input's specifications, else the pool's own), when it exists. */
async function imageOf(
  em: EntityManager,
  input: WorkerPoolInput,
  pool: WorkerPool | null,
): Promise<WorkerImage | null> {
  const name =
    input.specifications == null && pool ? imageNameOf(pool.specifications) : imageNameOf(input.specifications);
  return name === null ? null : findWorkerImage(em, name);
}

function storedAccount(pool: WorkerPool, secrets: SecretBox): Record<string, unknown> | null {
  return pool.providerAccountEncrypted
    ? (JSON.parse(secrets.open(pool.providerAccountEncrypted)) as Record<string, unknown>)
    : null;
}

/** Creates a worker pool. Admin only. */
export async function createWorkerPool(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'input' | 'tags' | 'providers' | 'server'>,
  secrets: SecretBox,
  input: WorkerPoolInput,
): Promise<WorkerPool> {
  requireAdmin(viewer);
  const name = parseInput(nameSchema, input.name, 'input.name');
  if (await em.count(WorkerPoolSchema, { name }))
    throw new AlreadyExistsError(`a worker pool "${name}" already exists`);
  const image = await imageOf(em, input, null);
  const pool = em.create(WorkerPoolSchema, { name, providerType: 'local' });
  applyPoolInput(
    pool,
    input,
    image,
    await publishedPlaces(em, imageNameOf(input.specifications)),
    config,
    secrets,
    true,
  );
  await creating(`a worker pool "${name}"`, () => em.flush());
  await noteRequiredTags(em, pool.requiredTags);
  return pool;
}

/**
 * Changes a worker pool: its workers' tags and concurrency follow its tags and specifications, and
 * a pool whose launches failed may try again at once (the admin may have fixed what failed); the
 * provisioner hears of it (poolChanged) and runs a cycle. Admin only.
 */
export async function updateWorkerPool(
  em: EntityManager,
  viewer: Viewer,
  config: Pick<Config, 'input' | 'tags' | 'providers' | 'server'>,
  secrets: SecretBox,
  events: Events,
  input: WorkerPoolInput,
): Promise<WorkerPool> {
  requireAdmin(viewer);
  const pool = await em.findOne(WorkerPoolSchema, { name: input.name });
  if (!pool) throw new NotFoundError(`input.name: no worker pool "${input.name}"`, 'input.name');
  const published = await publishedPlaces(em, imageNameOf(input.specifications ?? pool.specifications));
  // A pool moves to another host only once its instances stopped (hostProblems).
  const liveInstances =
    input.host != null && pool.host != null && input.host !== pool.host
      ? await em.count(InstanceSchema, { pool, state: { $in: [...LIVE_INSTANCE_STATES] } })
      : 0;
  applyPoolInput(pool, input, await imageOf(em, input, pool), published, config, secrets, false, liveInstances);
  // The admin may have fixed what made launches fail: the pool tries again at once.
  pool.launchFailures = 0;
  pool.launchRetryAt = null;
  const workers = await em.find(WorkerSchema, { pool, terminatedAt: null });
  for (const worker of workers) {
    refreshWorkerTags(worker, pool, config.tags);
    if (pool.specifications.concurrency != null) worker.concurrency = poolConcurrency(pool.specifications);
  }
  await em.flush();
  await noteRequiredTags(em, pool.requiredTags);
  for (const worker of workers) events.publish('workerChanged', { id: worker.id, name: worker.name });
  events.publish('poolChanged', { id: pool.id, name: pool.name });
  return pool;
}

/** Issues a one-shot activation token for a new instance of the pool (shown once). Admin only. */
export async function createActivationToken(
  em: EntityManager,
  viewer: Viewer,
  config: WorkersConfig,
  input: { pool: string; expiresAt?: Date | null },
): Promise<{ token: Token; value: string }> {
  requireAdmin(viewer);
  const now = new Date();
  const expiresAt = parseInput(
    z
      .date()
      .refine((d) => d.getTime() > now.getTime(), 'must be in the future')
      .nullish(),
    input.expiresAt,
    'input.expiresAt',
  );
  const pool = await em.findOne(WorkerPoolSchema, { name: input.pool });
  if (!pool) throw new NotFoundError(`input.pool: no worker pool "${input.pool}"`, 'input.pool');
  if (!pool.enabled)
    throw new InvalidStateError(
      `the worker pool "${pool.name}" is disabled: enable it first (its activation tokens are refused while it is)`,
    );
  const issued = issueToken(em, {
    kind: 'activation',
    pool,
    label: `activation for pool ${pool.name}`,
    expiresAt: expiresAt ?? new Date(now.getTime() + config.activationTokenTtlMs),
  });
  await em.flush();
  return issued;
}
