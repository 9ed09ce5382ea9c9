/** The sbuild workflow: fans a source package out into one sbuild work request per architecture. */
import { z } from 'zod';
import {
  buildProfile,
  debianArchitecture,
  noTags,
  objectId,
  sourcePackageName,
  targetDistribution,
} from '../task-data.js';
import { EXECUTOR_BACKENDS } from '../types.js';
import type {
  ChildPlan,
  EnvironmentFacts,
  TaskDefinition,
  WorkflowContext,
  WorkflowPlan,
  WorkflowPlanError,
} from '../types.js';

/** The architecture name that stands for `Architecture: all` packages, built on a concrete one. */
export const ARCH_ALL = 'all';

const schema = z
  .object({
    input: z
      .object({
        // tagsched keeps no artifacts: the workflow names the source package its children build.
        source_package: sourcePackageName,
        source_artifact: objectId.optional(),
      })
      .strict(),
    target_distribution: targetDistribution,
    architectures: z.array(debianArchitecture).min(1).max(50),
    arch_all_host_architecture: debianArchitecture.default('amd64'),
    backend: z.enum(EXECUTOR_BACKENDS).optional(),
    environment_variant: z.string().min(1).max(100).optional(),
    build_profiles: z.array(buildProfile).optional(),
  })
  .strict();

/** What one architecture's children share: where they run and in which environment. */
export interface ArchitectureTarget {
  /** As asked for: a concrete architecture, or `all`. */
  architecture: string;
  /** The concrete architecture it runs on (`arch_all_host_architecture` for `all`). */
  host: string;
  environment: EnvironmentFacts;
}

/**
 * The environment of each asked architecture: `codename` × host architecture (× variant), the newest
 * registered. Every missing one is an error on `path`, so one answer names them all.
 */
export function architectureTargets(
  request: {
    codename: string;
    architectures: readonly string[];
    archAllHost: string;
    variant: string | null;
    path: string;
  },
  ctx: WorkflowContext,
): { targets: ArchitectureTarget[]; errors: WorkflowPlanError[] } {
  const targets: ArchitectureTarget[] = [];
  const errors: WorkflowPlanError[] = [];
  for (const architecture of [...new Set(request.architectures)]) {
    const host = architecture === ARCH_ALL ? request.archAllHost : architecture;
    const environment = ctx.environment(request.codename, host, request.variant);
    if (environment) targets.push({ architecture, host, environment });
    else {
      const variant = request.variant === null ? '' : ` and variant ${request.variant}`;
      errors.push({
        code: 'UNKNOWN_ENVIRONMENT',
        path: request.path,
        message: `no environment of codename ${request.codename} for architecture ${host}${variant}: an admin registers one with createEnvironment`,
      });
    }
  }
  return { targets, errors };
}

/** The key of an architecture's sbuild child, which the pipeline's tests depend on. */
export const sbuildKey = (architecture: string) => `sbuild:${architecture}`;

/**
 * One sbuild child per target: the source package, the host architecture and its environment, the
 * backend and build profiles when given; `all` builds the `Architecture: all` packages only, every
 * other architecture its `any` packages (as Debusine's sbuild workflow does).
 */
export function sbuildChildren(
  request: { sourcePackage: string; backend: string | undefined; buildProfiles: readonly string[] | undefined },
  targets: readonly ArchitectureTarget[],
): ChildPlan[] {
  return targets.map((t) => ({
    key: sbuildKey(t.architecture),
    taskType: 'worker',
    taskName: 'sbuild',
    taskData: {
      source_package: request.sourcePackage,
      host_architecture: t.host,
      environment_id: t.environment.id,
      build_components: [t.architecture === ARCH_ALL ? 'all' : 'any'],
      ...(request.backend === undefined ? {} : { backend: request.backend }),
      ...(request.buildProfiles === undefined ? {} : { build_profiles: [...request.buildProfiles] }),
    },
    dependsOn: [],
  }));
}

function expand(data: z.output<typeof schema>, ctx: WorkflowContext): WorkflowPlan {
  const codename = data.target_distribution.slice(data.target_distribution.indexOf(':') + 1);
  const { targets, errors } = architectureTargets(
    {
      codename,
      architectures: data.architectures,
      archAllHost: data.arch_all_host_architecture,
      variant: data.environment_variant ?? null,
      path: 'taskData.target_distribution',
    },
    ctx,
  );
  if (errors.length) return { ok: false, errors };
  return {
    ok: true,
    children: sbuildChildren(
      { sourcePackage: data.input.source_package, backend: data.backend, buildProfiles: data.build_profiles },
      targets,
    ),
  };
}

/** Expands on the server into one sbuild per architecture; the workflow itself is never assigned. */
export const sbuildWorkflow: TaskDefinition<z.output<typeof schema>> = {
  type: 'workflow',
  name: 'sbuild',
  version: 1,
  description: 'Build a source package for several architectures.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
  expand,
};
