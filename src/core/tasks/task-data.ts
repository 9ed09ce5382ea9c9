/**
 * The taskData fields and tag derivations that several tasks share, kept in one place so that
 * every executor task picks its architecture the same way (docs/design.md: work requests).
 */
import { z } from 'zod';
import { EXECUTOR_BACKENDS } from './types.js';
import type { ExecutorBackend, TaskAnalysisContext, TaskTag, TaskTags } from './types.js';

/** A Debian architecture name (`amd64`, `ppc64el`, ...), which also keeps derived tags valid. */
export const debianArchitecture = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]*$/, 'expected a Debian architecture name such as amd64');

/** A Debian source package name, per Debian policy §5.6.1. */
export const sourcePackageName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9+.-]+$/, 'expected a Debian source package name such as hello');

/** A Debian build profile (`nocheck`, `nodoc`, ...). */
export const buildProfile = z.string().regex(/^[a-z0-9][a-z0-9.+-]*$/, 'expected a build profile such as nocheck');

/** A distribution's vendor or codename (`debian`, `trixie`): the characters an environment's codename may have. */
export const distributionPart = z
  .string()
  .max(100)
  .regex(/^[a-z0-9][a-z0-9.+-]*$/, 'expected a name such as debian or trixie');

/** `vendor:codename`, e.g. `debian:trixie`. */
export const targetDistribution = z
  .string()
  .max(201)
  .regex(/^[a-z0-9][a-z0-9.+-]*:[a-z0-9][a-z0-9.+-]*$/, 'expected vendor:codename such as debian:trixie');

/** A database id (artifact, environment, ...): ids start at 1. */
export const objectId = z.number().int().positive();

/** The fields every executor task has: where it runs and with which backend. */
export const executorFields = {
  environment_id: objectId.optional(),
  backend: z.enum(EXECUTOR_BACKENDS).default('auto'),
};

/** The validated data an executor task's tags derive from; task-specific fields are ignored. */
export interface ExecutorTaskData {
  backend: ExecutorBackend;
  environment_id?: number | undefined;
  host_architecture?: string | undefined;
  source_package?: string | undefined;
}

/** A worker that runs `auto` picks `unshare`, so that is what the task must find. */
const AUTO_BACKEND = 'unshare';

/** The environment id an executor task names, for the caller to look up before analysis. */
export function executorEnvironmentId(data: ExecutorTaskData): number | null {
  return data.environment_id ?? null;
}

/**
 * The tags of an executor task: an environment pins the architecture (it is built for one), and
 * a host architecture that differs from it makes a cross build whose target the task provides.
 */
export function executorTags(data: ExecutorTaskData, ctx: TaskAnalysisContext, capability: string | null): TaskTags {
  const required: TaskTag[] = [];
  const provided: TaskTag[] = [];
  if (capability !== null) required.push({ tag: `worker:cap:${capability}`, source: 'task-registry' });
  const backend = data.backend === 'auto' ? AUTO_BACKEND : data.backend;
  required.push({ tag: `worker:executor:${backend}`, source: 'task-data:backend' });

  if (data.environment_id !== undefined) {
    const environment = ctx.environment;
    if (environment === null || environment.id !== data.environment_id) {
      // The caller must look the environment up first; analysing without it would pick a wrong arch.
      throw new Error(`environment ${data.environment_id} was not resolved before analysis`);
    }
    required.push({ tag: `worker:build-arch:${environment.architecture}`, source: `environment:${environment.id}` });
    if (data.host_architecture !== undefined && data.host_architecture !== environment.architecture) {
      provided.push({ tag: `task:cross-target:${data.host_architecture}`, source: 'task-data:host_architecture' });
    }
  } else if (data.host_architecture !== undefined) {
    required.push({ tag: `worker:build-arch:${data.host_architecture}`, source: 'task-data:host_architecture' });
  } else {
    required.push({ tag: `worker:build-arch:${ctx.defaultArchitecture}`, source: 'default-architecture' });
  }

  if (data.source_package !== undefined) provided.push(sourcePackageTag(data.source_package));
  return { provided, required };
}

/** The provided tag naming a task's source package, so rules can single out heavy packages. */
export function sourcePackageTag(name: string): TaskTag {
  return { tag: `task:source-package:${name}`, source: 'task-data:source_package' };
}

/** The fields of tasks that bootstrap a system (mmdebstrap, simplesystemimagebuild). */
export const bootstrapFields = {
  bootstrap_options: z
    .object({
      architecture: debianArchitecture,
      variant: z
        .enum([
          'extract',
          'custom',
          'essential',
          'apt',
          'required',
          'minbase',
          'buildd',
          'important',
          'debootstrap',
          'standard',
        ])
        .optional(),
    })
    .strict(),
  bootstrap_repositories: z
    .array(
      z
        .object({
          mirror: z.url({ protocol: /^(https?|file)$/ }),
          suite: z.string().min(1),
          components: z
            .array(z.string().regex(/^[a-z0-9][a-z0-9/+.-]*$/, 'expected an archive component such as main'))
            .min(1)
            .optional(),
        })
        .strict(),
    )
    .min(1),
};

/** The validated data a bootstrap task's tags derive from. */
export interface BootstrapTaskData {
  bootstrap_options: { architecture: string };
}

/** A bootstrap runs mmdebstrap natively for its architecture, with no executor of its own. */
export function bootstrapTags(data: BootstrapTaskData): TaskTags {
  return {
    provided: [],
    required: [
      { tag: 'worker:cap:mmdebstrap', source: 'task-registry' },
      {
        tag: `worker:build-arch:${data.bootstrap_options.architecture}`,
        source: 'task-data:bootstrap_options.architecture',
      },
    ],
  };
}

/** The analysis of tasks whose data says nothing about where they run. */
export function noTags(): TaskTags {
  return { provided: [], required: [] };
}
