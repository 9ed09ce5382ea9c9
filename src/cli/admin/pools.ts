/**
 * Worker pools: list, show (with its instances and its provider's state), create and update
 * (typed specifications as flags and/or a JSON file, limits, tags, the provider account from a
 * file), and one-shot activation tokens.
 */
import { formatCost } from '../../scheduler/rules/pool-cost.js';
import type { Command } from 'commander';
import { collect, decimal, expiryOf, integer, items, jsonObjectFile } from './arguments.js';
import { ERROR_SELECTION, TypedErrorResult } from './client.js';
import { specificationProblems } from '../../services/pools/pool-specifications.js';
import { AdminError, EXIT, usageError } from './exit-codes.js';
import { heading, instant, list, printSecretOnce, renderFields, renderTable, type Output } from './output.js';
import type { Ctx, Register } from './command-context.js';
import { addInstancesCommand, INSTANCE_FIELDS, instanceTable, type InstanceRow } from './instances.js';
import { tagTable } from './workers.js';

/** The typed specifications, every field (handlers and command are shown to admins only). */
const SPEC_FIELDS = `architectures command concurrency cpuCount diskGib enableBackends enableTasks handlers { task command } image instanceType
  location memoryGib providerImage securityGroupIds subnetId`;
const POOL_FIELDS = `name providerType enabled hasProviderAccount maxActiveInstances minIdleInstances idleTimeoutSeconds
  targetLatencySeconds monthlyRuntimeBudgetSeconds maxInstanceLifetimeSeconds maxWorkRequestsPerInstance maxReplacingInstances billingPeriodSeconds scaleDownDelaySeconds maxLaunchesPerMinute minIdleInstancesNow
  warmSchedule { timeZone periods { days from to minIdleInstances } } monthRuntimeSeconds pricePerHour monthlyCostBudget monthCost degraded lastError lastErrorAt lastErrorKind launchFailures launchRetryAt
  providedTags requiredTags specifications { ${SPEC_FIELDS} } createdAt`;

interface PoolRow {
  name: string;
  providerType: string;
  enabled: boolean;
  hasProviderAccount: boolean;
  maxActiveInstances: number;
  minIdleInstances: number;
  idleTimeoutSeconds: number;
  targetLatencySeconds: number;
  monthlyRuntimeBudgetSeconds: number | null;
  maxInstanceLifetimeSeconds: number | null;
  maxWorkRequestsPerInstance: number | null;
  maxReplacingInstances: number;
  billingPeriodSeconds: number | null;
  scaleDownDelaySeconds: number | null;
  maxLaunchesPerMinute: number | null;
  minIdleInstancesNow: number;
  warmSchedule: {
    timeZone: string;
    periods: { days: string[]; from: string; to: string; minIdleInstances: number }[];
  } | null;
  monthRuntimeSeconds: number;
  pricePerHour: number | null;
  monthlyCostBudget: number | null;
  monthCost: number;
  degraded: boolean;
  lastError: string | null;
  lastErrorAt: string | null;
  lastErrorKind: string | null;
  launchFailures: number;
  launchRetryAt: string | null;
  providedTags: string[];
  requiredTags: string[];
  specifications: Record<string, unknown>;
  createdAt: string;
  templateProvidedTags?: { tag: string; provenance: string; source: string }[];
  templateRequiredTags?: { tag: string; provenance: string; source: string }[];
  instances?: { edges: { node: InstanceRow }[]; pageInfo: { hasNextPage: boolean } };
}

const POOLS = `query Pools { workerPools { ${POOL_FIELDS} } }`;
const POOL = `query Pool($name: String!) {
  workerPool(name: $name) {
    ${POOL_FIELDS} templateProvidedTags { tag provenance source } templateRequiredTags { tag provenance source }
    instances(first: 20) { edges { node { ${INSTANCE_FIELDS} } } pageInfo { hasNextPage } }
  }
}`;
const CREATE = `mutation CreateWorkerPool($input: WorkerPoolInput!, $key: String) {
  createWorkerPool(input: $input, idempotencyKey: $key) { ${ERROR_SELECTION} ... on WorkerPool { ${POOL_FIELDS} } }
}`;
const UPDATE = `mutation UpdateWorkerPool($input: WorkerPoolInput!) { updateWorkerPool(input: $input) { ${ERROR_SELECTION} ... on WorkerPool { ${POOL_FIELDS} } } }`;
const ACTIVATION = `mutation CreateActivationToken($input: CreateActivationTokenInput!) {
  createActivationToken(input: $input) { ${ERROR_SELECTION} ... on ActivationTokenPayload { token id expiresAt } }
}`;

/** The options of pool create and update. */
interface PoolOptions {
  provider?: string;
  providerAccountFile?: string;
  specFile?: string;
  cpuCount?: string;
  memoryGib?: string;
  diskGib?: string;
  concurrency?: string;
  image?: string;
  instanceType?: string;
  location?: string;
  providerImage?: string;
  subnetId?: string;
  securityGroup?: string[];
  handler?: string[];
  architecture?: string[];
  backend?: string[];
  task?: string[];
  provide?: string[];
  require?: string[];
  maxActive?: string;
  minIdle?: string;
  idleTimeout?: string;
  targetLatency?: string;
  monthlyBudget?: string;
  pricePerHour?: string;
  monthlyCostBudget?: string;
  maxLifetime?: string;
  maxRequestsPerInstance?: string;
  maxReplacing?: string;
  billingPeriod?: string;
  scaleDownDelay?: string;
  maxLaunchesPerMinute?: string;
  warmScheduleFile?: string;
  enable?: boolean;
  disable?: boolean;
  idempotencyKey?: string;
}

/** The specification fields given as flags (only those given). */
function specificationFlags(o: PoolOptions): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (o.cpuCount !== undefined) spec.cpuCount = integer('--cpu-count', o.cpuCount, 1);
  if (o.memoryGib !== undefined) spec.memoryGib = decimal('--memory-gib', o.memoryGib, 0);
  if (o.diskGib !== undefined) spec.diskGib = decimal('--disk-gib', o.diskGib, 0);
  if (o.concurrency !== undefined) spec.concurrency = integer('--concurrency', o.concurrency, 1);
  if (o.image !== undefined) spec.image = o.image;
  if (o.instanceType !== undefined) spec.instanceType = o.instanceType;
  if (o.location !== undefined) spec.location = o.location;
  if (o.providerImage !== undefined) spec.providerImage = o.providerImage;
  if (o.subnetId !== undefined) spec.subnetId = o.subnetId;
  if (o.securityGroup) spec.securityGroupIds = items(o.securityGroup);
  if (o.handler) spec.handlers = o.handler.map(handlerArg);
  if (o.architecture) spec.architectures = items(o.architecture);
  if (o.backend) spec.enableBackends = items(o.backend);
  if (o.task) spec.enableTasks = items(o.task);
  return spec;
}

/** `TASK=COMMAND` of --handler, as a PoolHandlerInput. */
function handlerArg(raw: string): { task: string; command: string } {
  const eq = raw.indexOf('=');
  if (eq <= 0 || eq === raw.length - 1)
    throw usageError(`--handler takes TASK=COMMAND, e.g. noop=true; got ${JSON.stringify(raw)}`);
  return { task: raw.slice(0, eq), command: raw.slice(eq + 1) };
}

/** Specifications as read back, as an input again: the fields that are set (the API replaces the whole set on update). */
function specificationsAsInput(spec: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(spec).filter(([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0)),
  );
}

/**
 * The WorkerPoolInput of the options. Specifications: the file (or, on update, the pool's current
 * ones) with the flags on top, sent only when something about them was given.
 */
/**
 * Checks the specifications (a --spec-file with the flags over it) by the server's own rules before
 * anything is sent, so that every problem is named with its path at once, as the server names those
 * of other fields; a refusal is the server's typed error in form (exit 4, and the error as data for --json).
 */
function checkSpecifications(specifications: unknown, operation: 'createWorkerPool' | 'updateWorkerPool'): void {
  const { problems } = specificationProblems(specifications, 'input.specifications');
  if (!problems.length) return;
  const error = {
    __typename: 'InputError',
    code: problems[0].code,
    message: problems[0].message,
    path: problems[0].path,
    problems,
  };
  throw new TypedErrorResult(error, { [operation]: error });
}

async function poolInput(
  ctx: Ctx,
  name: string,
  o: PoolOptions,
  current: PoolRow | null,
  operation: 'createWorkerPool' | 'updateWorkerPool',
): Promise<Record<string, unknown>> {
  if (o.enable && o.disable) throw usageError('give --enable or --disable, not both');
  const input: Record<string, unknown> = { name };
  const flags = specificationFlags(o);
  if (o.specFile || Object.keys(flags).length) {
    const base = o.specFile
      ? await jsonObjectFile('--spec-file', o.specFile, ctx.io.stdin)
      : specificationsAsInput(current?.specifications ?? {});
    input.specifications = { ...base, ...flags };
    checkSpecifications(input.specifications, operation);
  }
  if (o.providerAccountFile) {
    if (o.providerAccountFile === '-' && o.specFile === '-')
      throw usageError('only one of --spec-file and --provider-account-file can be read from stdin');
    input.providerAccount = await jsonObjectFile('--provider-account-file', o.providerAccountFile, ctx.io.stdin);
  }
  if (o.provider !== undefined) input.providerType = o.provider;
  if (o.provide) input.providedTags = items(o.provide);
  if (o.require) input.requiredTags = items(o.require);
  if (o.maxActive !== undefined) input.maxActiveInstances = integer('--max-active', o.maxActive, 0);
  if (o.minIdle !== undefined) input.minIdleInstances = integer('--min-idle', o.minIdle, 0);
  if (o.idleTimeout !== undefined) input.idleTimeoutSeconds = integer('--idle-timeout', o.idleTimeout, 0);
  if (o.targetLatency !== undefined) input.targetLatencySeconds = integer('--target-latency', o.targetLatency, 1);
  if (o.monthlyBudget !== undefined)
    input.monthlyRuntimeBudgetSeconds = integer('--monthly-budget', o.monthlyBudget, 0);
  // Cost (docs/operating/pools.md, "Cost"); `none` removes them. The server checks the range.
  if (o.pricePerHour !== undefined)
    input.pricePerHour = o.pricePerHour === 'none' ? null : decimal('--price-per-hour', o.pricePerHour, 0);
  if (o.monthlyCostBudget !== undefined)
    input.monthlyCostBudget =
      o.monthlyCostBudget === 'none' ? null : decimal('--monthly-cost-budget', o.monthlyCostBudget, 0);
  // `none` removes the limit.
  if (o.maxLifetime !== undefined)
    input.maxInstanceLifetimeSeconds = o.maxLifetime === 'none' ? null : integer('--max-lifetime', o.maxLifetime, 60);
  if (o.billingPeriod !== undefined)
    input.billingPeriodSeconds = o.billingPeriod === 'none' ? null : integer('--billing-period', o.billingPeriod, 60);
  if (o.scaleDownDelay !== undefined)
    input.scaleDownDelaySeconds =
      o.scaleDownDelay === 'none' ? null : integer('--scale-down-delay', o.scaleDownDelay, 0);
  if (o.maxLaunchesPerMinute !== undefined)
    input.maxLaunchesPerMinute =
      o.maxLaunchesPerMinute === 'none' ? null : integer('--max-launches-per-minute', o.maxLaunchesPerMinute, 1);
  if (o.warmScheduleFile !== undefined) {
    if (o.warmScheduleFile === 'none') input.warmSchedule = null;
    else {
      if (o.warmScheduleFile === '-' && (o.specFile === '-' || o.providerAccountFile === '-'))
        throw usageError('only one option can be read from stdin');
      input.warmSchedule = await jsonObjectFile('--warm-schedule-file', o.warmScheduleFile, ctx.io.stdin);
    }
  }
  if (o.maxReplacing !== undefined) input.maxReplacingInstances = integer('--max-replacing', o.maxReplacing, 1);
  if (o.maxRequestsPerInstance !== undefined)
    input.maxWorkRequestsPerInstance =
      o.maxRequestsPerInstance === 'none' ? null : integer('--max-requests-per-instance', o.maxRequestsPerInstance, 1);
  if (o.enable) input.enabled = true;
  if (o.disable) input.enabled = false;
  return input;
}

function seconds(n: number | null): string {
  if (n === null) return 'none';
  return n >= 3600 && n % 3600 === 0 ? `${n / 3600} h` : n >= 60 && n % 60 === 0 ? `${n / 60} min` : `${n} s`;
}

/** `key=value` pairs of the specifications that are set, by key; handlers as `task=command`. */
function specText(spec: Record<string, unknown>): string {
  const entries = Object.entries(specificationsAsInput(spec ?? {})).sort(([a], [b]) => a.localeCompare(b));
  const value = (v: unknown): string =>
    Array.isArray(v)
      ? v
          .map((x) =>
            x && typeof x === 'object' && 'task' in x ? `${String(x.task)}=${String(x.command)}` : String(x),
          )
          .join(',')
      : String(v);
  return entries.length ? entries.map(([k, v]) => `${k}=${value(v)}`).join(' ') : '-';
}

function poolTable(out: Output, pools: readonly PoolRow[]): string {
  return renderTable(out, pools, [
    { header: 'NAME', value: (p) => p.name },
    { header: 'PROVIDER', value: (p) => p.providerType },
    { header: 'ENABLED', value: (p) => (p.enabled ? 'yes' : 'no') },
    { header: 'MAX', value: (p) => p.maxActiveInstances, align: 'right' },
    { header: 'MIN IDLE', value: (p) => p.minIdleInstances, align: 'right' },
    {
      header: 'DEGRADED',
      value: (p) => (p.degraded ? 'yes' : 'no'),
      style: (t, p) => (p.degraded ? out.color.red(t) : t),
    },
    { header: 'SPECIFICATIONS', value: (p) => specText(p.specifications), shrink: true },
  ]);
}

async function listPools(ctx: Ctx) {
  const data = await ctx.api().query<{ workerPools: PoolRow[] }>(POOLS);
  if (ctx.out.json) return ctx.out.writeJson(data);
  ctx.out.write(poolTable(ctx.out, data.workerPools));
}

async function fetchPool(ctx: Ctx, name: string): Promise<{ workerPool: PoolRow }> {
  const data = await ctx.api().query<{ workerPool: PoolRow | null }>(POOL, { name });
  if (!data.workerPool) throw new AdminError(`no pool named ${JSON.stringify(name)}`, EXIT.notFound, 'NOT_FOUND');
  return data as { workerPool: PoolRow };
}

async function showPool(ctx: Ctx, name: string) {
  const data = await fetchPool(ctx, name);
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { out } = ctx;
  const p = data.workerPool;
  out.write(
    renderFields(out, [
      ['Pool', p.name],
      ['Provider', `${p.providerType}${p.hasProviderAccount ? ' (provider account set)' : ''}`],
      ['Enabled', p.enabled ? 'yes' : 'no'],
      ['Specifications', specText(p.specifications)],
      ['Provided tags', list(p.providedTags)],
      ['Required tags', list(p.requiredTags)],
      ['Max active', p.maxActiveInstances],
      ['Min idle', p.minIdleInstances],
      ['Idle timeout', seconds(p.idleTimeoutSeconds)],
      ['Target latency', seconds(p.targetLatencySeconds)],
      ['Monthly budget', seconds(p.monthlyRuntimeBudgetSeconds)],
      [
        'Instance lifetime',
        p.maxInstanceLifetimeSeconds === null
          ? 'no limit'
          : `at most ${seconds(p.maxInstanceLifetimeSeconds)}, then retired`,
      ],
      [
        'Billing period',
        p.billingPeriodSeconds === null
          ? 'by the second'
          : `${seconds(p.billingPeriodSeconds)}: idle instances stop near the end of their paid period`,
      ],
      ['Scale-down delay', p.scaleDownDelaySeconds ? seconds(p.scaleDownDelaySeconds) : 'none'],
      ['Launch rate', p.maxLaunchesPerMinute === null ? 'no limit' : `at most ${p.maxLaunchesPerMinute} a minute`],
      [
        'Warm capacity',
        p.warmSchedule?.periods.length
          ? `${p.warmSchedule.periods.map((w) => `${w.days.join(',')} ${w.from}-${w.to}: ${w.minIdleInstances} idle`).join('; ')} (${p.warmSchedule.timeZone}); now ${p.minIdleInstancesNow}`
          : 'none',
      ],
      [
        'Rollouts',
        `at most ${p.maxReplacingInstances} outdated instance${p.maxReplacingInstances === 1 ? '' : 's'} replaced at a time`,
      ],
      [
        'Requests per instance',
        p.maxWorkRequestsPerInstance === null
          ? 'no limit'
          : `at most ${p.maxWorkRequestsPerInstance}${p.maxWorkRequestsPerInstance === 1 ? ' (a fresh machine for each)' : ''}, then retired`,
      ],
      ['Price per hour', p.pricePerHour === null ? 'not set' : formatCost(p.pricePerHour)],
      ['Monthly cost budget', p.monthlyCostBudget === null ? 'no limit' : formatCost(p.monthlyCostBudget)],
      [
        'Cost this month',
        `${formatCost(p.monthCost)}${p.monthlyCostBudget ? ` (${Math.round((100 * p.monthCost) / p.monthlyCostBudget)}% of the cost budget)` : ''}`,
      ],
      [
        'Runtime this month',
        `${seconds(Math.round(p.monthRuntimeSeconds))}${p.monthlyRuntimeBudgetSeconds ? ` (${Math.round((100 * p.monthRuntimeSeconds) / p.monthlyRuntimeBudgetSeconds)}% of the budget)` : ''}`,
      ],
      ['Degraded', p.degraded ? out.color.red('yes: its launches keep failing') : 'no'],
      [
        'Last provider error',
        p.lastError
          ? `${p.lastErrorKind ? `${p.lastErrorKind}: ` : ''}${p.lastError} (${instant(p.lastErrorAt)})`
          : null,
      ],
      [
        'Failed launches',
        p.launchFailures
          ? `${p.launchFailures} in a row${p.launchRetryAt ? `; next try ${instant(p.launchRetryAt)}` : ''}`
          : null,
      ],
      ['Created', instant(p.createdAt)],
    ]),
  );
  out.write(heading(out, 'Instances (newest first)'));
  out.write(instanceTable(out, p.instances?.edges.map((e) => e.node) ?? []));
  if (p.instances?.pageInfo.hasNextPage) out.line(out.color.dim(`(more: tagsched-admin pool instances ${p.name})`));
  out.write(heading(out, 'Template tags: what its workers will provide'));
  out.write(tagTable(out, p.templateProvidedTags ?? []));
  out.write(heading(out, 'Template tags: what its workers will require'));
  out.write(tagTable(out, p.templateRequiredTags ?? []));
}

async function createPool(ctx: Ctx, name: string, o: PoolOptions) {
  const input = await poolInput(ctx, name, o, null, 'createWorkerPool');
  const data = await ctx.api().mutate(CREATE, { input, key: o.idempotencyKey ?? null }, 'createWorkerPool');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const p = data.createWorkerPool as PoolRow;
  ctx.out.line(
    `Created pool ${p.name} (${p.providerType}, ${p.enabled ? 'enabled' : 'disabled'}): ${specText(p.specifications)}.`,
  );
}

async function updatePool(ctx: Ctx, name: string, o: PoolOptions) {
  const needsCurrent = !o.specFile && Object.keys(specificationFlags(o)).length > 0;
  const current = needsCurrent ? (await fetchPool(ctx, name)).workerPool : null;
  const input = await poolInput(ctx, name, o, current, 'updateWorkerPool');
  if (Object.keys(input).length === 1) throw usageError('nothing to change: give at least one option (see --help)');
  const data = await ctx.api().mutate(UPDATE, { input }, 'updateWorkerPool');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const p = data.updateWorkerPool as PoolRow;
  ctx.out.line(
    `Updated pool ${p.name} (${p.providerType}, ${p.enabled ? 'enabled' : 'disabled'}): ${specText(p.specifications)}.`,
  );
}

async function activationToken(ctx: Ctx, pool: string, opts: { expires?: string; expiresIn?: string }) {
  const data = await ctx
    .api()
    .mutate(ACTIVATION, { input: { pool, expiresAt: expiryOf(opts) ?? null } }, 'createActivationToken');
  if (ctx.out.json) return ctx.out.writeJson(data);
  const { token, id, expiresAt } = data.createActivationToken;
  printSecretOnce(
    ctx.out,
    ctx.io.stderr,
    `A one-shot activation token for pool ${pool}: token ${id}, expiring ${instant(expiresAt)} (its agent takes it as TAGSCHED_ACTIVATION_TOKEN; \`tagsched-admin token revoke ${id}\` revokes it)`,
    token,
  );
}

/** The options create and update share. */
function poolOptions(command: Command): Command {
  return command
    .option('--provider <type>', 'the provider type, required to create one: local, exec, hetzner, ec2 or qemu')
    .option(
      '--provider-account-file <file>',
      'provider credentials, a JSON object, from a file (- for stdin); never shown again',
    )
    .option(
      '--spec-file <file>',
      'specifications, a JSON object (PoolSpecificationsInput: e.g. the exec command), from a file (- for stdin); the flags below override its keys',
    )
    .option('--cpu-count <n>', 'CPUs per instance (worker:cpu-count)')
    .option('--memory-gib <n>', 'memory per instance, GiB (worker:memory-gib)')
    .option('--disk-gib <n>', 'disk per instance, GiB (worker:disk-gib)')
    .option('--concurrency <n>', 'work requests each of its workers runs at once')
    .option(
      '--image <name>',
      'a registered worker image (tagsched-admin images list): its tags replace --architecture, --backend and --task',
    )
    .option('--instance-type <type>', "the provider's instance type")
    .option('--location <place>', "the provider's location or region")
    .option('--provider-image <image>', "the provider's image: a Hetzner image, an EC2 AMI")
    .option('--subnet-id <id>', 'EC2: the subnet')
    .option('--security-group <id>', 'EC2: a security group id (repeatable)', collect)
    .option(
      '--handler <task=command>',
      'local pools: a task its agents run and the command that runs it (repeatable)',
      collect,
    )
    .option('--architecture <arch>', 'an architecture its machines run (repeatable)', collect)
    .option(
      '--backend <name>',
      'an executor backend of its image: unshare, incus-lxc, incus-vm, qemu (repeatable)',
      collect,
    )
    .option('--task <name>', 'a task its image is built for (repeatable)', collect)
    .option('--provide <tag>', 'a tag its workers provide (repeatable; replaces the list)', collect)
    .option('--require <tag>', 'a tag its workers require (repeatable; replaces the list)', collect)
    .option('--max-active <n>', 'most instances at once')
    .option('--min-idle <n>', 'idle instances kept running')
    .option('--idle-timeout <seconds>', 'an idle instance past this is stopped')
    .option('--target-latency <seconds>', 'how long pending work may wait for capacity')
    .option('--monthly-budget <seconds>', "the instances' runtime allowed per month")
    .option(
      '--price-per-hour <price>',
      "the price of one instance-hour in your currency, for cost; an offering's pricePerHour wins (none: removes it)",
    )
    .option(
      '--monthly-cost-budget <amount>',
      "the instances' cost allowed per calendar month: no launch once reached (none: no limit)",
    )
    .option(
      '--max-lifetime <seconds>',
      'an instance older than this retires: no new work, stopped once idle, replaced (none: no limit)',
    )
    .option(
      '--billing-period <seconds>',
      "the provider's billing period, e.g. 3600: idle instances stop near the end of their paid period (none: by the second)",
    )
    .option('--scale-down-delay <seconds>', 'no idle instance stops this long after a launch (none: no delay)')
    .option('--max-launches-per-minute <n>', 'at most this many launches a minute (none: no limit)')
    .option(
      '--warm-schedule-file <file>',
      'more idle instances at times of day: JSON {"timeZone": ..., "periods": [...]} (- for stdin, none to remove)',
    )
    .option('--max-replacing <n>', 'when its specifications change, outdated instances replaced at a time (default 1)')
    .option(
      '--max-requests-per-instance <n>',
      'an instance retires after this many work requests; 1: a fresh machine for each (none: no limit)',
    )
    .option('--enable', 'the provisioner may start its instances')
    .option('--disable', 'the provisioner starts none');
}

export const registerPoolCommands: Register = (program: Command, action) => {
  const pool = program.command('pool').description('Worker pools: templates for the workers a provider starts');
  action(
    pool.command('list').description('Lists the pools').addHelpText('after', '\nExamples:\n  tagsched-admin pool list'),
    (ctx) => listPools(ctx),
  );
  action(
    pool
      .command('show <name>')
      .description('Shows a pool: provider, specifications, limits and the template tags its workers will have')
      .addHelpText('after', '\nExamples:\n  tagsched-admin pool show cloud --json'),
    (ctx, [name]) => showPool(ctx, name),
  );
  action(
    poolOptions(pool.command('create <name>').description('Creates a pool (admins)'))
      .option('--idempotency-key <key>', 'a retry with the same key answers the first create')
      .addHelpText(
        'after',
        `
Examples:
  tagsched-admin pool create cloud --provider hetzner --provider-account-file ~/secrets/hetzner.json \\
    --instance-type cx42 --location fsn1 --provider-image debian-13 --cpu-count 8 --memory-gib 16 --max-active 10
  tagsched-admin pool create big --spec-file big-spec.json --require worker:class:large`,
      ),
    (ctx, [name], opts) => createPool(ctx, name, opts),
  );
  action(
    poolOptions(
      pool.command('update <name>').description('Changes a pool (admins); only what is given changes'),
    ).addHelpText(
      'after',
      `
Specification flags change those keys of the current specifications; --spec-file replaces them
(with the flags on top). --provide and --require replace the pool's tag lists.

Examples:
  tagsched-admin pool update cloud --max-active 20 --min-idle 1
  tagsched-admin pool update cloud --memory-gib 64
  tagsched-admin pool update cloud --disable`,
    ),
    (ctx, [name], opts) => updatePool(ctx, name, opts),
  );
  addInstancesCommand(pool, action);
  action(
    pool
      .command('activation-token <name>')
      .description(
        'Makes a pool-wide one-shot activation token for an instance started by hand, printed once (admins); it expires, and `token list --pool NAME` lists them',
      )
      .option(
        '--expires <instant>',
        "refused from this instant on (ISO 8601); default: the server's TAGSCHED_ACTIVATION_TOKEN_TTL_SECONDS from now",
      )
      .option('--expires-in <duration>', 'refused after this long, e.g. 2h, 30m, 1d')
      .addHelpText(
        'after',
        '\nExamples:\n  tagsched-admin pool activation-token cloud > activation.token\n  tagsched-admin pool activation-token cloud --expires-in 2h > activation.token',
      ),
    (ctx, [name], opts) => activationToken(ctx, name, opts),
  );
};
