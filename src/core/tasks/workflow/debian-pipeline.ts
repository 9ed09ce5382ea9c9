/** The debian_pipeline workflow: build a source package, then check and test what each build made. */
import { z } from 'zod';
import { debianArchitecture, distributionPart, noTags, objectId, sourcePackageName } from '../task-data.js';
import { EXECUTOR_BACKENDS } from '../types.js';
import type { ChildPlan, TaskDefinition, WorkflowContext, WorkflowPlan } from '../types.js';
import { architectureTargets, sbuildChildren, sbuildKey } from './sbuild.js';

const backend = z.enum(EXECUTOR_BACKENDS).optional();

const schema = z
  .object({
    // tagsched keeps no artifacts: the pipeline names the source package its children work on.
    source_package: sourcePackageName,
    source_artifact: objectId.optional(),
    vendor: distributionPart,
    codename: distributionPart,
    architectures: z.array(debianArchitecture).min(1).max(50).optional(),
    arch_all_host_architecture: debianArchitecture.default('amd64'),
    sbuild_backend: backend,
    sbuild_environment_variant: z.string().min(1).max(100).optional(),
    enable_autopkgtest: z.boolean().default(true),
    autopkgtest_backend: backend,
    enable_lintian: z.boolean().default(true),
    lintian_backend: backend,
    lintian_fail_on_severity: z
      .enum(['error', 'warning', 'info', 'pedantic', 'experimental', 'overridden', 'none'])
      .optional(),
    enable_piuparts: z.boolean().default(true),
    piuparts_backend: backend,
  })
  .strict();

type Data = z.output<typeof schema>;

/** The checks run on each architecture's build, in this order, each depending on that build. */
const CHECKS = [
  {
    task: 'lintian',
    enabled: (d: Data) => d.enable_lintian,
    extra: (d: Data) => ({ backend: d.lintian_backend, fail_on_severity: d.lintian_fail_on_severity }),
  },
  {
    task: 'autopkgtest',
    enabled: (d: Data) => d.enable_autopkgtest,
    extra: (d: Data) => ({ backend: d.autopkgtest_backend }),
  },
  { task: 'piuparts', enabled: (d: Data) => d.enable_piuparts, extra: (d: Data) => ({ backend: d.piuparts_backend }) },
] as const;

/** The fields that were given: a child's stored taskData holds no undefined keys. */
const given = (fields: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));

/**
 * The sbuild workflow's children (one per architecture; without `architectures`, one per architecture
 * that has an environment of `codename`), then lintian, autopkgtest and piuparts on each
 * architecture, each depending on that architecture's sbuild.
 */
function expand(data: Data, ctx: WorkflowContext): WorkflowPlan {
  const variant = data.sbuild_environment_variant ?? null;
  const architectures = data.architectures ?? ctx.architectures(data.codename, variant);
  if (!architectures.length) {
    return {
      ok: false,
      errors: [
        {
          code: 'UNKNOWN_ENVIRONMENT',
          path: 'taskData.codename',
          message: `no environment of codename ${data.codename} is registered: name the architectures, or have an admin register environments with createEnvironment`,
        },
      ],
    };
  }
  const path = data.architectures ? 'taskData.architectures' : 'taskData.codename';
  const { targets, errors } = architectureTargets(
    { codename: data.codename, architectures, archAllHost: data.arch_all_host_architecture, variant, path },
    ctx,
  );
  if (errors.length) return { ok: false, errors };
  const children: ChildPlan[] = sbuildChildren(
    { sourcePackage: data.source_package, backend: data.sbuild_backend, buildProfiles: undefined },
    targets,
  );
  for (const t of targets) {
    for (const check of CHECKS) {
      if (!check.enabled(data)) continue;
      children.push({
        key: `${check.task}:${t.architecture}`,
        taskType: 'worker',
        taskName: check.task,
        taskData: given({
          source_package: data.source_package,
          host_architecture: t.host,
          environment_id: t.environment.id,
          ...check.extra(data),
        }),
        dependsOn: [sbuildKey(t.architecture)],
      });
    }
  }
  return { ok: true, children };
}

/** Expands on the server into builds and their checks; the workflow itself is never assigned. */
export const debianPipelineWorkflow: TaskDefinition<Data> = {
  type: 'workflow',
  name: 'debian_pipeline',
  version: 1,
  description: 'Build, test and check a Debian source package.',
  schema,
  environmentId: () => null,
  analyze: () => noTags(),
  expand,
};
