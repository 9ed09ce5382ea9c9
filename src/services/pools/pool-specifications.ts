/**
 * A pool's specifications (docs/design.md: pools and instances), typed: the instance size and concurrency, what its image
 * holds, the handlers of a local pool, and what the cloud providers need. Every bad value is named
 * with its path and what is allowed; nothing reaches the database unchecked.
 */
import { z } from 'zod';
import { DEFAULT_LOCAL_HANDLERS } from '../../provisioner/providers/local-handlers.js';
import { runsHandlers } from '../../provisioner/providers.js';
import { WORKER_TASK_CATALOG } from '../../tasks/registry.js';
import { debianArchitecture } from '../../tasks/task-data.js';
import { EXECUTOR_BACKENDS } from '../../tasks/types.js';
import type { PoolSpecifications } from '../../tags/worker-tags.js';
import { ERROR_CODES, type InputProblem } from '../../errors.js';
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

const specificationsSchema = z
  .object({
    cpuCount: z.number().int().min(1).max(4096).nullish(),
    memoryGib: z.number().positive().max(1_000_000).nullish(),
    diskGib: z.number().positive().max(1_000_000).nullish(),
    concurrency: z.number().int().min(1).max(1024).nullish(),
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
  })
  .strict();

/** Checks a pool's specifications as a client gives them: every problem, or them with the fields left unset dropped. */
export function specificationProblems(value: unknown, path: string): { data: PoolSpecifications; problems: [] } | { data: null; problems: InputProblem[] } {
  const parsed = zodProblems(specificationsSchema, value, path);
  if (!parsed.data) return parsed;
  return { data: Object.fromEntries(Object.entries(parsed.data).filter(([, v]) => v !== null && v !== undefined)) as PoolSpecifications, problems: [] };
}

const isDefaultHandlers = (handlers: PoolSpecifications['handlers']) => JSON.stringify(handlers ?? []) === JSON.stringify(DEFAULT_LOCAL_HANDLERS);

/**
 * Handlers are for local pools only (providers.ts: runsHandlers; the others start agents that are
 * not told any command): given to a pool of another provider, they are a problem, unless they are the
 * default a local pool got (withHandlerDefaults drops those when a pool changes provider).
 */
export function handlerProblems(providerType: string, specifications: PoolSpecifications, path: string): InputProblem[] {
  const handlers = specifications.handlers ?? [];
  if (runsHandlers(providerType) || !handlers.length || isDefaultHandlers(handlers)) return [];
  return [
    { code: ERROR_CODES.INVALID_INPUT, message: `${path}.handlers: only local pools run handlers (this pool's provider is ${providerType})`, path: `${path}.handlers`, tag: null },
  ];
}

/** The specifications a pool of this provider keeps: a local pool with no handler gets the default (noop with `true`); another provider's pool none. */
export function withHandlerDefaults(providerType: string, specifications: PoolSpecifications): PoolSpecifications {
  const handlers = specifications.handlers ?? [];
  if (runsHandlers(providerType)) return handlers.length ? specifications : { ...specifications, handlers: [...DEFAULT_LOCAL_HANDLERS] };
  if (!handlers.length) return specifications;
  const { handlers: _dropped, ...rest } = specifications;
  return rest;
}
