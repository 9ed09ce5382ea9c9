/**
 * The workflows' expansions and the combination of their children's results, table-driven and pure:
 * what each workflow expands into for a given taskData and set of environments.
 */
import { describe, expect, it } from 'vitest';
import { validateTaskInput } from '../../src/core/tasks/analyze.js';
import { TASKS, findTask } from '../../src/core/tasks/registry.js';
import type { ChildPlan, EnvironmentFacts } from '../../src/core/tasks/types.js';
import { workflowContext } from '../../src/core/tasks/workflow-context.js';
import { combineChildResults, type FinishedChild } from '../../src/core/tasks/workflow-result.js';

const env = (
  id: number,
  architecture: string,
  codename = 'trixie',
  variant: string | null = null,
): EnvironmentFacts => ({ id, codename, architecture, variant, backend: null });

const ENVIRONMENTS = [
  env(1, 'amd64'),
  env(2, 'arm64'),
  env(3, 'amd64', 'bookworm'),
  env(4, 'amd64', 'trixie', 'buildd'),
  env(5, 'riscv64', 'sid'),
];

function expand(name: string, data: unknown, environments = ENVIRONMENTS) {
  const validation = validateTaskInput('workflow', name, data);
  if (!validation.ok) throw new Error(validation.error.message);
  return findTask('workflow', name)!.expand!(validation.data, workflowContext(environments));
}

/** A plan in one line per child: key, task, the data that matters, and what it waits for. */
const summary = (children: ChildPlan[]) =>
  children.map((c) => ({ key: c.key, task: `${c.taskType}/${c.taskName}`, data: c.taskData, dependsOn: c.dependsOn }));

describe('every workflow expands, and only workflows do', () => {
  it.each(TASKS.map((t) => [`${t.type}/${t.name}`, t] as const))('%s', (_label, task) => {
    expect(typeof task.expand === 'function').toBe(task.type === 'workflow');
  });
});

describe('the sbuild workflow', () => {
  const base = { input: { source_package: 'hello', source_artifact: 7 }, target_distribution: 'debian:trixie' };

  it('makes one sbuild per architecture, in the environment of the codename and architecture (the newest one)', () => {
    const plan = expand('sbuild', {
      ...base,
      architectures: ['amd64', 'arm64', 'amd64'],
      backend: 'unshare',
      build_profiles: ['nocheck'],
    });
    expect(plan.ok && summary(plan.children)).toEqual([
      {
        key: 'sbuild:amd64',
        task: 'worker/sbuild',
        data: {
          source_package: 'hello',
          host_architecture: 'amd64',
          environment_id: 4,
          build_components: ['any'],
          backend: 'unshare',
          build_profiles: ['nocheck'],
        },
        dependsOn: [],
      },
      {
        key: 'sbuild:arm64',
        task: 'worker/sbuild',
        data: {
          source_package: 'hello',
          host_architecture: 'arm64',
          environment_id: 2,
          build_components: ['any'],
          backend: 'unshare',
          build_profiles: ['nocheck'],
        },
        dependsOn: [],
      },
    ]);
  });

  it('builds `all` on arch_all_host_architecture, and picks the variant asked for', () => {
    const plan = expand('sbuild', {
      ...base,
      architectures: ['all'],
      arch_all_host_architecture: 'amd64',
      environment_variant: 'buildd',
    });
    expect(plan.ok && summary(plan.children)).toEqual([
      {
        key: 'sbuild:all',
        task: 'worker/sbuild',
        data: { source_package: 'hello', host_architecture: 'amd64', environment_id: 4, build_components: ['all'] },
        dependsOn: [],
      },
    ]);
  });

  it('every child is valid data for the sbuild task', () => {
    const plan = expand('sbuild', { ...base, architectures: ['amd64', 'arm64', 'all'] });
    if (!plan.ok) throw new Error('no plan');
    for (const c of plan.children) expect(validateTaskInput(c.taskType, c.taskName, c.taskData).ok, c.key).toBe(true);
  });

  it('names every architecture without an environment, on target_distribution', () => {
    const plan = expand('sbuild', {
      ...base,
      architectures: ['amd64', 's390x', 'ppc64el'],
      environment_variant: 'buildd',
    });
    expect(plan).toEqual({
      ok: false,
      errors: [
        {
          code: 'UNKNOWN_ENVIRONMENT',
          path: 'taskData.target_distribution',
          message:
            'no environment of codename trixie for architecture s390x and variant buildd: an admin registers one with createEnvironment',
        },
        {
          code: 'UNKNOWN_ENVIRONMENT',
          path: 'taskData.target_distribution',
          message:
            'no environment of codename trixie for architecture ppc64el and variant buildd: an admin registers one with createEnvironment',
        },
      ],
    });
  });
});

describe('the debian_pipeline workflow', () => {
  const base = { source_package: 'hello', vendor: 'debian', codename: 'trixie' };
  const check = (task: string, arch: string, environmentId: number, extra: Record<string, unknown> = {}) => ({
    key: `${task}:${arch}`,
    task: `worker/${task}`,
    data: { source_package: 'hello', host_architecture: arch, environment_id: environmentId, ...extra },
    dependsOn: [`sbuild:${arch}`],
  });
  const build = (arch: string, environmentId: number, extra: Record<string, unknown> = {}) => ({
    key: `sbuild:${arch}`,
    task: 'worker/sbuild',
    data: {
      source_package: 'hello',
      host_architecture: arch,
      environment_id: environmentId,
      build_components: ['any'],
      ...extra,
    },
    dependsOn: [],
  });

  it.each([
    {
      name: 'without architectures: every architecture with an environment of the codename; all checks by default',
      data: base,
      children: [
        build('amd64', 4),
        build('arm64', 2),
        check('lintian', 'amd64', 4),
        check('autopkgtest', 'amd64', 4),
        check('piuparts', 'amd64', 4),
        check('lintian', 'arm64', 2),
        check('autopkgtest', 'arm64', 2),
        check('piuparts', 'arm64', 2),
      ],
    },
    {
      name: 'the checks that are switched off are left out; backends and options go to their task',
      data: {
        ...base,
        architectures: ['arm64'],
        enable_autopkgtest: false,
        enable_piuparts: false,
        sbuild_backend: 'incus-lxc',
        lintian_backend: 'unshare',
        lintian_fail_on_severity: 'warning',
      },
      children: [
        build('arm64', 2, { backend: 'incus-lxc' }),
        check('lintian', 'arm64', 2, { backend: 'unshare', fail_on_severity: 'warning' }),
      ],
    },
    {
      name: 'only the builds when every check is off',
      data: {
        ...base,
        architectures: ['amd64'],
        enable_lintian: false,
        enable_autopkgtest: false,
        enable_piuparts: false,
      },
      children: [build('amd64', 4)],
    },
    {
      name: 'the sbuild environment variant picks the environments of every child',
      data: { ...base, sbuild_environment_variant: 'buildd', enable_autopkgtest: false, enable_piuparts: false },
      children: [build('amd64', 4), check('lintian', 'amd64', 4)],
    },
  ])('$name', ({ data, children }) => {
    const plan = expand('debian_pipeline', data);
    expect(plan.ok && summary(plan.children)).toEqual(children);
    if (plan.ok)
      for (const c of plan.children) expect(validateTaskInput(c.taskType, c.taskName, c.taskData).ok, c.key).toBe(true);
  });

  it.each([
    {
      name: 'a codename with no environment at all',
      data: { ...base, codename: 'forky' },
      path: 'taskData.codename',
      message: /no environment of codename forky is registered/,
    },
    {
      name: 'an architecture without one',
      data: { ...base, architectures: ['amd64', 'mips64el'] },
      path: 'taskData.architectures',
      message: /no environment of codename trixie for architecture mips64el/,
    },
  ])('refuses $name', ({ data, path, message }) => {
    const plan = expand('debian_pipeline', data);
    expect(plan.ok).toBe(false);
    if (!plan.ok)
      expect(plan.errors).toEqual([{ code: 'UNKNOWN_ENVIRONMENT', path, message: expect.stringMatching(message) }]);
  });
});

describe('a workflow combines its children results: ERROR over FAILURE over SUCCESS (SKIPPED counts as success)', () => {
  const child = (
    id: number,
    status: FinishedChild['status'],
    result: FinishedChild['result'],
    taskName = 'sbuild',
  ): FinishedChild => ({ id, taskName, status, result });
  it.each([
    { name: 'no children', children: [], result: 'SUCCESS', reason: null },
    {
      name: 'all succeeded',
      children: [child(1, 'COMPLETED', 'SUCCESS'), child(2, 'COMPLETED', 'SUCCESS')],
      result: 'SUCCESS',
      reason: null,
    },
    {
      name: 'skipped counts as success',
      children: [child(1, 'COMPLETED', 'SUCCESS'), child(2, 'COMPLETED', 'SKIPPED')],
      result: 'SUCCESS',
      reason: null,
    },
    {
      name: 'one failed',
      children: [child(1, 'COMPLETED', 'SUCCESS'), child(2, 'COMPLETED', 'FAILURE', 'lintian')],
      result: 'FAILURE',
      reason: '1 of 2 children did not succeed: 2 (lintian) FAILURE',
    },
    {
      name: 'an error wins over a failure',
      children: [child(1, 'COMPLETED', 'FAILURE'), child(2, 'COMPLETED', 'ERROR')],
      result: 'ERROR',
      reason: '2 of 2 children did not succeed: 1 (sbuild) FAILURE, 2 (sbuild) ERROR',
    },
    {
      name: 'an aborted child counts as an error',
      children: [child(1, 'COMPLETED', 'FAILURE'), child(2, 'ABORTED', null, 'piuparts')],
      result: 'ERROR',
      reason: '2 of 2 children did not succeed: 1 (sbuild) FAILURE, 2 (piuparts) ABORTED',
    },
  ])('$name → $result', ({ children, result, reason }) => {
    expect(combineChildResults(children)).toEqual({ result, reason });
  });

  it('names ten children at most', () => {
    const many = Array.from({ length: 13 }, (_, i) => child(i + 1, 'COMPLETED', 'FAILURE'));
    expect(combineChildResults(many).reason).toBe(
      `13 of 13 children did not succeed: ${many
        .slice(0, 10)
        .map((c) => `${c.id} (sbuild) FAILURE`)
        .join(', ')}, and 3 more`,
    );
  });
});
