import { WorkerPoolSchema, type WorkerPool } from '../../storage/entities/worker-pool.js';
import { WEEKDAYS, type WarmPeriod, type WarmSchedule } from '../../shared/warm-schedule.js';
import { minIdleNow, WARM_PERIODS_MAX } from '../../scheduler/rules/scale-in.js';
import { builder } from '../builder.js';
import { firstDescription, firstOf } from './pagination.js';
import {
  AlreadyExistsError,
  ForbiddenError,
  InputError,
  InvalidStateError,
  NotFoundError,
  UnauthenticatedError,
} from '../../core/errors.js';
import type { Token } from '../../storage/entities/token.js';
import { isAdmin } from '../../services/identity/auth.js';
import { createActivationToken, createWorkerPool, updateWorkerPool } from '../../services/pools/pools.js';
import { listPools } from '../../services/pools/pool-reads.js';
import { poolHealth } from '../../scheduler/rules/pool-health.js';
import { poolConcurrency } from '../../scheduler/rules/pool-capacity.js';
import { launchPrice } from '../../scheduler/rules/pool-cost.js';
import { poolTagInput } from '../../scheduler/storage/pool-templates.js';
import type { SizeThresholds } from '../../core/tags/size-class.js';
import { computePoolTemplateTags, type PoolSpecifications } from '../../core/tags/worker-tags.js';
import { adminsOnly } from '../../services/work/idempotency.js';
import { createOnce, IDEMPOTENCY_KEY_DESCRIPTION } from './idempotency.js';
import { TagEntryRef } from './tag-entry.js';
import {
  MAX_OFFERINGS,
  offeringsOf,
  offeringStates,
  type Offering,
  type OfferingMark,
  type OfferingState,
} from '../../providers/offerings.js';

/** A worker pool as clients see it: everything but the provider account, which is write-only. */
export const WorkerPoolRef = builder.loadableObjectRef<WorkerPool, number>('WorkerPool', {
  load: async (ids, ctx) =>
    (await ctx.loaders.byId<WorkerPool>(WorkerPoolSchema).loadMany(ids)).map(
      (p, i) => p ?? new Error(`no pool ${ids[i]}`),
    ),
});

// The configured size thresholds, as for the pool's workers: a template must classify its size like they do.
const template = (pool: WorkerPool, sizeThresholds: SizeThresholds) =>
  computePoolTemplateTags(poolTagInput(pool), sizeThresholds);

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

const PoolHandlerRef = builder.objectRef<{ task: string; command: string }>('PoolHandler').implement({
  description: 'A task the agents of a local pool run, and the shell command that runs it',
  fields: (t) => ({
    task: t.exposeString('task', { description: 'The task name, e.g. sbuild' }),
    command: t.exposeString('command', { description: 'The shell command (sh -c) that runs it' }),
  }),
});

const OfferingRef = builder.objectRef<Offering>('Offering').implement({
  description: 'One way a pool may start a machine: an instance type in a location, on-demand or spot',
  fields: (t) => ({
    instanceType: t.exposeString('instanceType', {
      description: 'The server or instance type (a Hetzner server type, an EC2 instance type)',
    }),
    location: t.exposeString('location', {
      nullable: true,
      description: 'The EC2 availability zone or Hetzner location; null: wherever the provider chooses',
    }),
    market: t.exposeString('market', { description: 'on-demand or spot (spot: EC2 only)' }),
    maxPricePerHour: t.exposeFloat('maxPricePerHour', {
      nullable: true,
      description: 'Spot: the most paid per hour (USD on EC2); null: the spot price',
    }),
    pricePerHour: t.float({
      nullable: true,
      description:
        'The price of one hour of it (cost), in the site\u2019s currency; it wins over the pool\u2019s pricePerHour; null: not given',
      resolve: (o) => o.pricePerHour ?? null,
    }),
  }),
});

/** A pool's offering with what the marks say of it now. */
type PoolOfferingState = OfferingState & { readonly poolPricePerHour: number | null };

export const PoolOfferingRef = builder.objectRef<PoolOfferingState>('PoolOffering').implement({
  description: 'An offering of a pool, in the order launches try them, and whether a launch may use it now',
  fields: (t) => ({
    instanceType: t.string({ description: 'The server or instance type', resolve: (s) => s.offering.instanceType }),
    location: t.string({
      nullable: true,
      description: 'The EC2 availability zone or Hetzner location; null: wherever the provider chooses',
      resolve: (s) => s.offering.location,
    }),
    market: t.string({ description: 'on-demand or spot', resolve: (s) => s.offering.market }),
    maxPricePerHour: t.float({
      nullable: true,
      description: 'Spot: the most paid per hour; null: the spot price',
      resolve: (s) => s.offering.maxPricePerHour,
    }),
    pricePerHour: t.float({
      nullable: true,
      description:
        'What an instance launched from it is costed at per hour: its own price, a spot offering\u2019s maxPricePerHour (an upper bound), else the pool\u2019s; a Hetzner launch records the provider\u2019s price instead when the offering gives none; null: none known',
      resolve: (s) => launchPrice(s.offering, s.poolPricePerHour),
    }),
    key: t.exposeString('key', { description: 'Its identity in the marks: market:type@location[<=price]' }),
    unavailableUntil: t.expose('unavailableUntil', {
      type: 'DateTime',
      nullable: true,
      description:
        'Launches skip it until then, after it failed for capacity or quota (TAGSCHED_OFFERING_UNAVAILABLE_SECONDS); null: usable now',
    }),
    unavailableReason: t.exposeString('unavailableReason', {
      nullable: true,
      description: 'The provider error that marked it unavailable; null: usable now',
    }),
  }),
});

/** Every offering of a pool (its offerings list, or its one instanceType) with its mark if one holds now. */
export async function poolOfferingStates(
  pool: WorkerPool,
  marks: (id: number) => Promise<OfferingMark[]>,
): Promise<PoolOfferingState[]> {
  const offerings = offeringsOf(pool.specifications);
  const poolPricePerHour = pool.pricePerHour ?? null;
  return offerings.length
    ? offeringStates(offerings, await marks(pool.id), new Date()).map((s) => ({ ...s, poolPricePerHour }))
    : [];
}

const PoolSpecificationsRef = builder.objectRef<PoolSpecifications>('PoolSpecifications').implement({
  description: 'What a pool starts: instance size and concurrency, what its image holds, and what its provider needs',
  fields: (t) => ({
    cpuCount: t.int({
      nullable: true,
      description: 'CPUs per instance; null when unset',
      resolve: (s) => s.cpuCount ?? null,
    }),
    memoryGib: t.float({
      nullable: true,
      description: 'Memory per instance, GiB; null when unset',
      resolve: (s) => s.memoryGib ?? null,
    }),
    diskGib: t.float({
      nullable: true,
      description: 'Disk per instance, GiB; null when unset',
      resolve: (s) => s.diskGib ?? null,
    }),
    concurrency: t.int({
      description: 'The concurrency of the pool\u2019s workers (1 when unset)',
      resolve: (s) => poolConcurrency(s),
    }),
    offersResources: t.boolean({
      description:
        'Whether its workers share their CPUs, memory and disk among the requests they run (concurrency then caps their number); false when unset',
      resolve: (s) => s.offersResources === true,
    }),
    architectures: t.stringList({
      description: 'Debian architectures its machines run natively',
      resolve: (s) => s.architectures ?? [],
    }),
    enableBackends: t.stringList({
      description: 'Executor backends its image enables (unshare, incus-lxc, incus-vm, qemu)',
      resolve: (s) => s.enableBackends ?? [],
    }),
    enableTasks: t.stringList({ description: 'Tasks its image is built for', resolve: (s) => s.enableTasks ?? [] }),
    image: t.string({
      nullable: true,
      description: 'The tagsched worker image it boots; null when unset',
      resolve: (s) => str(s.image),
    }),
    handlers: t.field({
      type: [PoolHandlerRef],
      nullable: true,
      description:
        'Local pools: the commands their agents run on the server\u2019s machine (admins only; null for others)',
      resolve: (s, _a, ctx) => (isAdmin(ctx.viewer) ? (s.handlers ?? []) : null),
    }),
    instanceType: t.string({
      nullable: true,
      description: 'Cloud: the server or instance type; null when unset',
      resolve: (s) => str(s.instanceType),
    }),
    location: t.string({
      nullable: true,
      description: 'Cloud: the location, region or availability zone; null when unset',
      resolve: (s) => str(s.location),
    }),
    offerings: t.field({
      type: [OfferingRef],
      description:
        'Cloud: the offerings a launch tries in order, as given; empty when the pool names one instanceType instead (WorkerPool.offerings shows either, with their state)',
      resolve: (s) => (Array.isArray(s.offerings) ? offeringsOf(s) : []),
    }),
    providerImage: t.string({
      nullable: true,
      description: 'Cloud: the provider image (Hetzner image, EC2 AMI); null when unset',
      resolve: (s) => str(s.providerImage),
    }),
    subnetId: t.string({
      nullable: true,
      description: 'EC2: the subnet; null when unset',
      resolve: (s) => str(s.subnetId),
    }),
    securityGroupIds: t.stringList({
      description: 'EC2: security group ids',
      resolve: (s) => (Array.isArray(s.securityGroupIds) ? (s.securityGroupIds as string[]) : []),
    }),
    command: t.stringList({
      nullable: true,
      description: 'Exec pools: the program and its arguments (admins only; null for others)',
      resolve: (s, _a, ctx) => (isAdmin(ctx.viewer) && Array.isArray(s.command) ? (s.command as string[]) : null),
    }),
  }),
});

WorkerPoolRef.implement({
  description:
    'A set of workers the provisioner starts and stops on demand, all from one template; provider credentials are never shown',
  fields: (t) => ({
    name: t.exposeString('name', { description: 'Its unique name' }),
    providerType: t.exposeString('providerType', { description: 'local, exec, hetzner, ec2 or qemu' }),
    host: t.string({
      nullable: true,
      description:
        'Host-bound providers (local, qemu): the host (TAGSCHED_HOST_NAME) its instances run on, launched and listed by a server process of that host; null: any host (a cloud pool, or a local or qemu pool made before pools kept their host)',
      resolve: (pool) => pool.host ?? null,
    }),
    hasProviderAccount: t.boolean({
      description: 'Whether provider credentials are set; they are never returned',
      resolve: (pool) => pool.providerAccountEncrypted != null,
    }),
    specifications: t.field({
      type: PoolSpecificationsRef,
      description: 'What it starts',
      resolve: (pool) => pool.specifications,
    }),
    providedTags: t.exposeStringList('providedTags', {
      description: 'The tags the admin gave the pool (provided side)',
    }),
    requiredTags: t.exposeStringList('requiredTags', {
      description: 'The tags the admin gave the pool (required side: what its workers ask of tasks)',
    }),
    templateProvidedTags: t.field({
      type: [TagEntryRef],
      description:
        'What any worker this pool starts will provide: pool tags, specification values and what its image holds, worker:type:worker',
      resolve: (pool, _args, ctx) => template(pool, ctx.config.tags.sizeThresholds).provided,
    }),
    templateRequiredTags: t.field({
      type: [TagEntryRef],
      description: 'What any worker this pool starts will require of its tasks',
      resolve: (pool, _args, ctx) => template(pool, ctx.config.tags.sizeThresholds).required,
    }),
    maxActiveInstances: t.exposeInt('maxActiveInstances', { description: 'At most this many instances at once' }),
    minIdleInstances: t.exposeInt('minIdleInstances', { description: 'Instances kept running idle, ready for work' }),
    idleTimeoutSeconds: t.exposeInt('idleTimeoutSeconds', {
      description: 'An instance idle this long (seconds) is stopped, above minIdleInstances',
    }),
    targetLatencySeconds: t.exposeInt('targetLatencySeconds', {
      description: 'How long (seconds) pending work may wait before another instance is started for it',
    }),
    monthlyRuntimeBudgetSeconds: t.exposeInt('monthlyRuntimeBudgetSeconds', {
      nullable: true,
      description: 'Instance runtime allowed per calendar month (seconds); null: no limit',
    }),
    maxInstanceLifetimeSeconds: t.exposeInt('maxInstanceLifetimeSeconds', {
      nullable: true,
      description:
        'An instance older than this (seconds) retires: it takes no new work, is stopped once idle, and replaced if work asks; null: no limit',
    }),
    maxReplacingInstances: t.exposeInt('maxReplacingInstances', {
      description:
        'In a rollout (its specifications changed), at most this many outdated instances are replaced at a time: idle ones retire, counting their replacements still launching',
    }),
    maxWorkRequestsPerInstance: t.exposeInt('maxWorkRequestsPerInstance', {
      nullable: true,
      description: 'An instance retires after this many work requests (1: a fresh machine for each); null: no limit',
    }),
    billingPeriodSeconds: t.exposeInt('billingPeriodSeconds', {
      nullable: true,
      description:
        'Its provider bills instances by this period (3600: by the started hour): an idle instance is stopped only near the end of its paid period; null: billed by the second',
    }),
    scaleDownDelaySeconds: t.exposeInt('scaleDownDelaySeconds', {
      nullable: true,
      description: 'No idle instance is stopped this long after its last launch; null: none',
    }),
    maxLaunchesPerMinute: t.exposeInt('maxLaunchesPerMinute', {
      nullable: true,
      description: 'At most this many launches a minute; null: no limit',
    }),
    warmSchedule: t.field({
      type: WarmScheduleRef,
      nullable: true,
      description: 'More instances kept idle at some times of day; null: minIdleInstances always',
      resolve: (pool) => pool.warmSchedule ?? null,
    }),
    minIdleInstancesNow: t.int({
      description: 'The instances it keeps idle now: its warm schedule’s, else minIdleInstances',
      resolve: (pool) => minIdleNow(pool, new Date()),
    }),
    monthRuntimeSeconds: t.float({
      description: 'The runtime of its instances in this calendar month (UTC), what monthlyRuntimeBudgetSeconds limits',
      resolve: async (pool, _a, ctx) => (await ctx.loaders.monthRuntimes()).get(pool.id) ?? 0,
    }),
    pricePerHour: t.float({
      nullable: true,
      description:
        'The price of one instance-hour in the site\u2019s currency (docs/operating/pools.md, "Cost"); an offering\u2019s own price wins; null: not given',
      resolve: (pool) => pool.pricePerHour ?? null,
    }),
    monthlyCostBudget: t.float({
      nullable: true,
      description:
        'It launches only while its committed cost this month (monthCost, with each live instance launched this month counted at least at its first hour or billing period) is below this, checked for each launch (limit COST_BUDGET); null: no limit',
      resolve: (pool) => pool.monthlyCostBudget ?? null,
    }),
    monthCost: t.float({
      description:
        'The cost of its instances in this calendar month (UTC): each one\u2019s price \u00d7 its runtime in the month (started periods when billed by period), what monthlyCostBudget limits with the live instances\u2019 first charges; 0 without prices',
      resolve: async (pool, _a, ctx) => (await ctx.loaders.monthCosts()).get(pool.id) ?? 0,
    }),
    enabled: t.exposeBoolean('enabled', { description: 'False: the provisioner starts nothing for it' }),
    degraded: t.boolean({
      description:
        'Its launches keep failing (TAGSCHED_DEGRADED_AFTER_FAILURES in a row, or one only an admin can cure); lastError says why',
      resolve: (pool, _a, ctx) => poolHealth(pool, new Date(), ctx.config.provisioner.degradedAfterFailures).degraded,
    }),
    launchFailures: t.exposeInt('launchFailures', {
      description: 'Launches that failed in a row since the last one that worked',
    }),
    launchRetryAt: t.expose('launchRetryAt', {
      type: 'DateTime',
      nullable: true,
      description: 'After failed launches, no launch is tried before this',
    }),
    offerings: t.field({
      type: [PoolOfferingRef],
      description:
        'Cloud: the offerings launches try, in order (its offerings, or its one instanceType and location, on-demand), each with until when and why it is unavailable; empty for local, exec and qemu pools',
      resolve: (pool, _a, ctx) => poolOfferingStates(pool, (id) => ctx.loaders.offeringMarks.load(id)),
    }),
    lastError: t.exposeString('lastError', {
      nullable: true,
      description: 'The last provider error of the pool (launch, stop or list)',
    }),
    lastErrorKind: t.exposeString('lastErrorKind', {
      nullable: true,
      description: 'quota, capacity, auth, timeout, invalid or unavailable',
    }),
    lastErrorAt: t.expose('lastErrorAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When lastError happened; null: never',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When it was created' }),
  }),
});

const DAY_NAMES: Record<(typeof WEEKDAYS)[number], string> = {
  MON: 'Monday',
  TUE: 'Tuesday',
  WED: 'Wednesday',
  THU: 'Thursday',
  FRI: 'Friday',
  SAT: 'Saturday',
  SUN: 'Sunday',
};
const WeekdayEnum = builder.enumType('Weekday', {
  description: 'A day of the week',
  values: Object.fromEntries(WEEKDAYS.map((d) => [d, { description: DAY_NAMES[d] }])) as Record<
    (typeof WEEKDAYS)[number],
    { description: string }
  >,
});

const WarmPeriodRef = builder.objectRef<WarmPeriod>('WarmPeriod').implement({
  description: 'A time of day when a pool keeps more instances idle',
  fields: (t) => ({
    days: t.field({ type: [WeekdayEnum], description: 'The days it applies on', resolve: (p) => [...p.days] }),
    from: t.exposeString('from', { description: 'Its start, HH:MM in the schedule’s time zone' }),
    to: t.exposeString('to', { description: 'Its end (excluded), HH:MM in the schedule’s time zone, up to 24:00' }),
    minIdleInstances: t.exposeInt('minIdleInstances', { description: 'Instances kept idle in it' }),
  }),
});

const WarmScheduleRef = builder.objectRef<WarmSchedule>('WarmSchedule').implement({
  description:
    'Warm capacity by schedule: more instances kept idle at some times of day, in a time zone (daylight saving time included)',
  fields: (t) => ({
    timeZone: t.exposeString('timeZone', { description: 'An IANA time zone, such as Europe/Berlin' }),
    periods: t.field({
      type: [WarmPeriodRef],
      description: `Its periods (at most ${WARM_PERIODS_MAX}); where several apply, the largest minimum`,
      resolve: (s) => [...s.periods],
    }),
  }),
});

const WarmPeriodInput = builder.inputType('WarmPeriodInput', {
  description: 'A time of day when a pool keeps more instances idle',
  fields: (t) => ({
    days: t.field({ type: [WeekdayEnum], required: true, description: 'The days it applies on' }),
    from: t.string({ required: true, description: 'Its start, HH:MM' }),
    to: t.string({ required: true, description: 'Its end (excluded), HH:MM, after from, up to 24:00' }),
    minIdleInstances: t.int({ required: true, description: 'Instances kept idle in it' }),
  }),
});

const WarmScheduleInput = builder.inputType('WarmScheduleInput', {
  description: 'Warm capacity by schedule',
  fields: (t) => ({
    timeZone: t.string({ required: true, description: 'An IANA time zone, such as Europe/Berlin or UTC' }),
    periods: t.field({
      type: [WarmPeriodInput],
      required: true,
      description: `Its periods, at most ${WARM_PERIODS_MAX}`,
    }),
  }),
});

const PoolHandlerInput = builder.inputType('PoolHandlerInput', {
  description: 'A task the agents of a local pool run, and the command that runs it',
  fields: (t) => ({
    task: t.string({ required: true, description: 'The task name, e.g. sbuild' }),
    command: t.string({ required: true, description: 'A shell command (sh -c) on the server\u2019s machine' }),
  }),
});

const OfferingInput = builder.inputType('OfferingInput', {
  description: 'One way a pool may start a machine; a launch tries the next when one has no capacity or quota',
  fields: (t) => ({
    instanceType: t.string({ required: true, description: 'A Hetzner server type or an EC2 instance type' }),
    location: t.string({
      description: 'An EC2 availability zone or a Hetzner location; omitted: wherever the provider chooses',
    }),
    market: t.string({ description: 'on-demand (default) or spot (EC2 only)' }),
    maxPricePerHour: t.float({
      description: 'Spot only: the most paid per hour (USD on EC2); omitted: the spot price',
    }),
    pricePerHour: t.float({
      description:
        'The price of one hour of it in the site\u2019s currency (0, or 1e-9 to 1e6), for cost; it wins over the pool\u2019s pricePerHour; omitted: the pool\u2019s',
    }),
  }),
});

const PoolSpecificationsInput = builder.inputType('PoolSpecificationsInput', {
  description:
    'Typed pool specifications; a bad value is refused with its path and what is allowed. Replaces the whole set on update.',
  fields: (t) => ({
    cpuCount: t.int({ description: 'CPUs per instance (worker:cpu-count)' }),
    memoryGib: t.float({ description: 'Memory per instance, GiB (worker:memory-gib)' }),
    diskGib: t.float({ description: 'Disk per instance, GiB (worker:disk-gib)' }),
    concurrency: t.int({ description: 'Work requests each worker of the pool runs at once (1 to 1024; 1 when unset)' }),
    offersResources: t.boolean({
      description:
        'Its workers share their CPUs, memory and disk: each request reserves what it needs of them, concurrency caps the count (false when unset)',
    }),
    architectures: t.stringList({
      description: 'Debian architectures its machines run natively (worker:build-arch:*)',
    }),
    enableBackends: t.stringList({ description: 'unshare, incus-lxc, incus-vm, qemu (worker:executor:*)' }),
    enableTasks: t.stringList({
      description: 'Tasks its image is built for: their tools (worker:cap:*) and worker:task:* tags',
    }),
    image: t.string({
      description:
        'A registered worker image (registerWorkerImage): its manifest\u2019s tags are the pool\u2019s architectures, backends and tasks (leave those three out)',
    }),
    handlers: t.field({
      type: [PoolHandlerInput],
      description: 'Local pools only: the commands their agents run (default noop=true)',
    }),
    instanceType: t.string({ description: 'Cloud: a Hetzner server type or an EC2 instance type' }),
    location: t.string({ description: 'Cloud: a Hetzner location, or an EC2 region or availability zone' }),
    offerings: t.field({
      type: [OfferingInput],
      description: `Cloud: the offerings a launch tries, in order (at most ${MAX_OFFERINGS}); give either these or instanceType and location`,
    }),
    providerImage: t.string({ description: 'Cloud: a Hetzner image or an EC2 AMI id' }),
    subnetId: t.string({ description: 'EC2: the subnet' }),
    securityGroupIds: t.stringList({ description: 'EC2: security group ids' }),
    command: t.stringList({ description: 'Exec pools: the program and its arguments' }),
  }),
});

const WorkerPoolInput = builder.inputType('WorkerPoolInput', {
  description: 'A pool to create, or (by name) the fields of a pool to change',
  fields: (t) => ({
    name: t.string({ required: true, description: 'Its unique name' }),
    providerType: t.string({ description: 'local, exec, hetzner, ec2 or qemu (docs/operating/pools.md, "Providers")' }),
    host: t.string({
      description:
        'Local and qemu pools only: the host (its TAGSCHED_HOST_NAME) whose server processes run its instances; omitted or null: on create, the host of the process that creates it; on update, unchanged. Changed only while the pool has no live instance',
    }),
    providerAccount: t.field({
      type: 'JSON',
      description: 'Provider credentials (a JSON object); write-only, encrypted at rest',
    }),
    specifications: t.field({ type: PoolSpecificationsInput, description: 'What it starts' }),
    providedTags: t.stringList({ description: 'Tags every worker of the pool provides (admin provenance)' }),
    requiredTags: t.stringList({ description: 'Tags every worker of the pool requires of its tasks' }),
    maxActiveInstances: t.int({ description: 'At most this many instances at once' }),
    minIdleInstances: t.int({ description: 'Instances kept running idle' }),
    idleTimeoutSeconds: t.int({ description: 'Seconds an instance may stay idle before it is stopped' }),
    targetLatencySeconds: t.int({ description: 'Seconds pending work may wait before another instance is started' }),
    monthlyRuntimeBudgetSeconds: t.int({
      description: 'Instance runtime allowed per calendar month, seconds; omitted: no limit',
    }),
    maxInstanceLifetimeSeconds: t.int({
      description:
        'Seconds from its creation after which an instance retires (drained, stopped once idle, replaced); 60 at least; null: no limit',
    }),
    maxWorkRequestsPerInstance: t.int({
      description:
        'Work requests after which an instance retires (1: a fresh machine for each request); null: no limit',
    }),
    maxReplacingInstances: t.int({
      description: 'Outdated instances replaced at a time when its specifications change (default 1)',
    }),
    billingPeriodSeconds: t.int({
      description:
        'Its provider’s billing period (3600 for Hetzner): idle instances are stopped near the end of their paid period; null: by the second',
    }),
    scaleDownDelaySeconds: t.int({
      description: 'No idle instance is stopped this long after a launch (at most a day); null: none',
    }),
    maxLaunchesPerMinute: t.int({ description: 'At most this many launches a minute; null: no limit' }),
    warmSchedule: t.field({
      type: WarmScheduleInput,
      description: 'More instances kept idle at some times of day; null: none',
    }),
    pricePerHour: t.float({
      description:
        'The price of one instance-hour in the site\u2019s currency, 0, or 1e-9 to 1e6, for cost; null: removes it',
    }),
    monthlyCostBudget: t.float({
      description:
        'Cost allowed per calendar month (UTC), in the currency of its prices: no launch once it is reached, each live instance counted at least at its first hour or billing period; null: no limit',
    }),
    enabled: t.boolean({ description: 'False: the provisioner starts nothing for it' }),
  }),
});

const ActivationTokenPayload = builder.objectRef<{ token: Token; value: string }>('ActivationTokenPayload').implement({
  description: 'A one-shot activation token of a pool',
  fields: (t) => ({
    token: t.string({ description: 'Shown once: give it to one new instance of the pool', resolve: (p) => p.value }),
    id: t.id({
      description: 'Its id: it is listed by tokens(pool:) and revoked by revokeToken',
      resolve: (p) => p.token.id,
    }),
    expiresAt: t.field({
      type: 'DateTime',
      description: 'When it stops being accepted',
      resolve: (p) => p.token.expiresAt!,
    }),
  }),
});

builder.queryFields((t) => ({
  workerPools: t.field({
    type: [WorkerPoolRef],
    description: 'Every pool, by name',
    args: { first: t.arg.int({ description: firstDescription('Query.workerPools', 'pools') }) },
    resolve: (_root, args, ctx) => listPools(ctx.em, { limit: firstOf('Query.workerPools', args.first) }),
  }),
  workerPool: t.field({
    type: WorkerPoolRef,
    nullable: true,
    description: 'A pool by name; null when there is none',
    args: { name: t.arg.string({ required: true, description: "The pool's name" }) },
    resolve: (_root, { name }, ctx) => ctx.em.findOne(WorkerPoolSchema, { name }),
  }),
}));

builder.mutationFields((t) => ({
  createWorkerPool: t.field({
    type: WorkerPoolRef,
    description: 'Admin: creates a pool; the provisioner starts its instances as demand asks',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, AlreadyExistsError] },
    args: {
      input: t.arg({ type: WorkerPoolInput, required: true, description: 'The pool to create' }),
      idempotencyKey: t.arg.string({ description: IDEMPOTENCY_KEY_DESCRIPTION }),
    },
    resolve: async (_root, { input, idempotencyKey }, ctx) => {
      const pool = await createOnce<WorkerPool>(
        ctx,
        'createWorkerPool',
        idempotencyKey,
        input,
        {
          idOf: (pool) => pool.id,
          replay: (em, id) => em.findOneOrFail(WorkerPoolSchema, { id }),
          mayRead: adminsOnly,
        },
        (tx) => createWorkerPool(tx, ctx.viewer, ctx.config, ctx.secrets, input),
      );
      // Committed: the provisioner starts what the new pool needs now, not at its next periodic cycle.
      ctx.events.publish('poolChanged', { id: pool.id, name: pool.name });
      return pool;
    },
  }),
  updateWorkerPool: t.field({
    type: WorkerPoolRef,
    description: 'Admin: changes a pool; fields omitted are unchanged',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError] },
    args: {
      input: t.arg({
        type: WorkerPoolInput,
        required: true,
        description: 'The pool (by name) and the fields to change; omitted fields are unchanged',
      }),
    },
    resolve: (_root, { input }, ctx) =>
      updateWorkerPool(ctx.em, ctx.viewer, ctx.config, ctx.secrets, ctx.events, input),
  }),
  createActivationToken: t.field({
    type: ActivationTokenPayload,
    description:
      'Admin: a pool-wide one-shot token; the agent that trades it becomes a new worker of the pool (for instances started by hand). ' +
      'It expires (after TAGSCHED_ACTIVATION_TOKEN_TTL_SECONDS unless told), is listed by tokens(pool:), can be revoked, and is refused while the pool is disabled',
    errors: { types: [InputError, UnauthenticatedError, ForbiddenError, NotFoundError, InvalidStateError] },
    args: {
      input: t.arg({
        type: builder.inputType('CreateActivationTokenInput', {
          description: 'The pool the activation token is for',
          fields: (f) => ({
            pool: f.string({ required: true, description: "The pool's name" }),
            expiresAt: f.field({
              type: 'DateTime',
              description: 'Refused from this instant on; default: TAGSCHED_ACTIVATION_TOKEN_TTL_SECONDS from now',
            }),
          }),
        }),
        required: true,
        description: 'The pool to activate a worker of',
      }),
    },
    resolve: (_root, { input }, ctx) => createActivationToken(ctx.em, ctx.viewer, ctx.config.workers, input),
  }),
}));
