/**
 * A pool's specifications (docs/design.md: pools and instances), typed: the instance size and concurrency, what its image
 * holds, the handlers of a local pool, and what the cloud providers need. Every bad value is named
 * with its path and what is allowed; nothing reaches the database unchecked.
 */
import { z } from 'zod';
import { DEFAULT_LOCAL_HANDLERS } from '../../providers/local-handlers.js';
import { MAX_OFFERINGS, OFFERING_MARKETS, offeringKey, offeringsOf } from '../../providers/offerings.js';
import { runsHandlers } from '../../providers/registry.js';
import { isPricePerHour, MIN_SPOT_MAX_PRICE, PRICE_PER_HOUR_RANGE } from '../../scheduler/rules/pool-cost.js';
import { WORKER_TASK_CATALOG } from '../../core/tasks/registry.js';
import { debianArchitecture } from '../../core/tasks/task-data.js';
import { EXECUTOR_BACKENDS } from '../../core/tasks/types.js';
import type { PoolSpecifications } from '../../core/tags/worker-tags.js';
import { ERROR_CODES, type InputProblem } from '../../core/errors.js';
import { nameSchema, oneOf, zodProblems } from '../input/validate.js';

/** Executor backends an image may enable (`auto` is a task's choice, never a worker's). */
export const POOL_BACKENDS = EXECUTOR_BACKENDS.filter((b) => b !== 'auto') as unknown as readonly [string, ...string[]];
/** Tasks an image may be built for, or a local pool may handle: the worker and signing tasks of the registry. */
export const POOL_TASKS = WORKER_TASK_CATALOG.map((t) => t.name) as unknown as readonly [string, ...string[]];

// Values go into provider requests, environment variables and JSON columns: no control characters
// (a NUL breaks PostgreSQL's JSON, a newline TAGSCHED_HANDLERS).
const text = (max: number) =>
  z
    .string()
    .min(1, 'must not be empty')
    .max(max, `must be at most ${max} characters`)
    .regex(/^[^\u0000-\u001f\u007f]*$/, 'must not contain control characters (newlines, NUL, …)');
// Identifiers of cloud objects (instance types, locations, images, subnets, security groups): each
// provider checks their form itself (providers/spec-checks.ts), naming what it allows.
const cloudId = text(200);

const unique =
  <T>(key: (x: T) => string, what: string) =>
  (list: T[], ctx: z.RefinementCtx) => {
    const seen = new Set<string>();
    list.forEach((x, i) => {
      if (seen.has(key(x))) ctx.addIssue({ code: 'custom', path: [i], message: `${what} "${key(x)}" is given twice` });
      seen.add(key(x));
    });
  };

// An offering: an instance type in a location, on-demand or spot (providers/offerings.ts).
const offeringSchema = z
  .object({
    instanceType: cloudId,
    location: cloudId.nullish(),
    market: oneOf(OFFERING_MARKETS as unknown as readonly [string, ...string[]]).nullish(),
    maxPricePerHour: z.number().min(MIN_SPOT_MAX_PRICE, `must be at least ${MIN_SPOT_MAX_PRICE}`).max(10_000).nullish(),
    pricePerHour: z.number().refine(isPricePerHour, PRICE_PER_HOUR_RANGE).nullish(),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.maxPricePerHour != null && o.market !== 'spot')
      ctx.addIssue({ code: 'custom', path: ['maxPricePerHour'], message: 'is for spot offerings only (market: spot)' });
  });

const specificationsSchema = z
  .object({
    cpuCount: z.number().int().min(1).max(4096).nullish(),
    memoryGib: z.number().positive().max(1_000_000).nullish(),
    diskGib: z.number().positive().max(1_000_000).nullish(),
    concurrency: z.number().int().min(1).max(1024).nullish(),
    offersResources: z.boolean().nullish(),
    architectures: z
      .array(debianArchitecture.max(50))
      .max(20)
      .superRefine(unique((a) => a, 'architecture'))
      .nullish(),
    enableBackends: z
      .array(oneOf(POOL_BACKENDS))
      .max(POOL_BACKENDS.length)
      .superRefine(unique((b) => b, 'backend'))
      .nullish(),
    enableTasks: z
      .array(oneOf(POOL_TASKS))
      .max(POOL_TASKS.length)
      .superRefine(unique((t) => t, 'task'))
      .nullish(),
    image: nameSchema.nullish(),
    handlers: z
      .array(z.object({ task: oneOf(POOL_TASKS), command: text(4000) }))
      .max(POOL_TASKS.length)
      .superRefine(unique((h) => h.task, 'task'))
      .nullish(),
    instanceType: cloudId.nullish(),
    location: cloudId.nullish(),
    providerImage: cloudId.nullish(),
    subnetId: cloudId.nullish(),
    securityGroupIds: z.array(cloudId).max(20).nullish(),
    command: z.array(text(4000)).min(1, 'must name a program').max(100).nullish(),
    offerings: z
      .array(offeringSchema)
      .min(1, 'must name at least one offering (or leave offerings out and give instanceType)')
      .max(MAX_OFFERINGS, `must have at most ${MAX_OFFERINGS} offerings`)
      .superRefine((list, ctx) => {
        const seen = new Set<string>();
        list.forEach((o, i) => {
          const key = offeringKey(offeringsOf({ offerings: [o] })[0]!);
          if (seen.has(key)) ctx.addIssue({ code: 'custom', path: [i], message: `offering ${key} is given twice` });
          seen.add(key);
        });
      })
      .nullish(),
  })
  .strict()
  .superRefine((s, ctx) => {
    // One way to say what a pool starts: a list of offerings, or the single instanceType (and location).
    if (s.offerings == null) return;
    for (const field of ['instanceType', 'location'] as const) {
      if (s[field] != null)
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message:
            'give it in each of offerings, not beside them (a pool names either offerings or one instanceType and location)',
        });
    }
  });

/** Checks a pool's specifications as a client gives them: every problem, or them with the fields left unset dropped. */
export function specificationProblems(
  value: unknown,
  path: string,
): { data: PoolSpecifications; problems: [] } | { data: null; problems: InputProblem[] } {
  const parsed = zodProblems(specificationsSchema, value, path);
  if (!parsed.data) return parsed;
  const data = Object.fromEntries(
    Object.entries(parsed.data).filter(([, v]) => v !== null && v !== undefined),
  ) as PoolSpecifications;
  // Offerings are kept as offeringsOf reads them: market said, unset fields left out.
  if (data.offerings) {
    data.offerings = offeringsOf(data).map((o) => ({
      instanceType: o.instanceType,
      ...(o.location === null ? {} : { location: o.location }),
      market: o.market,
      ...(o.maxPricePerHour === null ? {} : { maxPricePerHour: o.maxPricePerHour }),
      ...(o.pricePerHour == null ? {} : { pricePerHour: o.pricePerHour }),
    }));
  }
  return { data, problems: [] };
}

const isDefaultHandlers = (handlers: PoolSpecifications['handlers']) =>
  JSON.stringify(handlers ?? []) === JSON.stringify(DEFAULT_LOCAL_HANDLERS);

/**
 * Handlers are for local pools only (providers/registry.ts: runsHandlers; the others start agents that are
 * not told any command): given to a pool of another provider, they are a problem, unless they are the
 * default a local pool got (withHandlerDefaults drops those when a pool changes provider).
 */
export function handlerProblems(
  providerType: string,
  specifications: PoolSpecifications,
  path: string,
): InputProblem[] {
  const handlers = specifications.handlers ?? [];
  if (runsHandlers(providerType) || !handlers.length || isDefaultHandlers(handlers)) return [];
  return [
    {
      code: ERROR_CODES.INVALID_INPUT,
      message: `${path}.handlers: only local pools run handlers (this pool's provider is ${providerType})`,
      path: `${path}.handlers`,
      tag: null,
    },
  ];
}

/** The specifications a pool of this provider keeps: a local pool with no handler gets the default (noop with `true`); another provider's pool none. */
export function withHandlerDefaults(providerType: string, specifications: PoolSpecifications): PoolSpecifications {
  const handlers = specifications.handlers ?? [];
  if (runsHandlers(providerType))
    return handlers.length ? specifications : { ...specifications, handlers: [...DEFAULT_LOCAL_HANDLERS] };
  if (!handlers.length) return specifications;
  const { handlers: _dropped, ...rest } = specifications;
  return rest;
}
