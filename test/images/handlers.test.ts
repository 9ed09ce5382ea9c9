import { describe, expect, it } from 'vitest';
import { planTask, type HandlerPlan } from '../../src/cli/image/handlers.js';

const ctx = { suite: 'trixie', architecture: 'amd64' };
const run = (argv: string[]): HandlerPlan => ({ kind: 'run', argv });

describe('image task handlers', () => {
  it.each<[string, string, unknown, HandlerPlan]>([
    ['noop', 'noop', {}, { kind: 'finish', success: true }],
    ['noop asked to fail', 'noop', { result: false }, { kind: 'finish', success: false }],
    [
      'sbuild',
      'sbuild',
      { source_package: 'hello', host_architecture: 'arm64' },
      run([
        'sbuild',
        '--verbose',
        '--chroot-mode=unshare',
        '--no-run-lintian',
        '--dist=trixie',
        '--arch=arm64',
        'hello',
      ]),
    ],
    [
      'sbuild of arch-all and source with profiles',
      'sbuild',
      {
        source_package: 'hello',
        host_architecture: 'amd64',
        backend: 'unshare',
        build_components: ['all', 'source'],
        build_profiles: ['nocheck', 'nodoc'],
      },
      run([
        'sbuild',
        '--verbose',
        '--chroot-mode=unshare',
        '--no-run-lintian',
        '--dist=trixie',
        '--arch=amd64',
        '--no-arch-any',
        '--arch-all',
        '--source',
        '--profiles=nocheck,nodoc',
        'hello',
      ]),
    ],
    [
      'autopkgtest with tests picked',
      'autopkgtest',
      { source_package: 'hello', host_architecture: 'amd64', include_tests: ['smoke'], exclude_tests: ['slow'] },
      run([
        'autopkgtest',
        '--output-dir=output',
        '--test-name=smoke',
        '--skip-test=slow',
        'hello',
        '--',
        'unshare',
        '--release',
        'trixie',
        '--arch',
        'amd64',
      ]),
    ],
    [
      'mmdebstrap from two repositories',
      'mmdebstrap',
      {
        bootstrap_options: { architecture: 'arm64', variant: 'minbase' },
        bootstrap_repositories: [
          { mirror: 'http://deb.debian.org/debian', suite: 'trixie', components: ['main', 'contrib'] },
          { mirror: 'http://deb.debian.org/debian', suite: 'trixie-updates' },
        ],
      },
      run([
        'mmdebstrap',
        '--architectures=arm64',
        '--variant=minbase',
        'trixie',
        'system.tar.xz',
        'deb http://deb.debian.org/debian trixie main contrib',
        'deb http://deb.debian.org/debian trixie-updates main',
      ]),
    ],
  ])('%s', (_, task, data, plan) => {
    expect(planTask(task, data, ctx)).toEqual(plan);
  });

  it.each<[string, string, unknown, RegExp]>([
    ['a task with no handler', 'lintian', {}, /no handler for task lintian/],
    [
      'another backend',
      'sbuild',
      { source_package: 'hello', host_architecture: 'amd64', backend: 'incus-lxc' },
      /backend incus-lxc: this image's handlers run the unshare backend only/,
    ],
    [
      'data the task schema refuses',
      'sbuild',
      { source_package: 'Hello World', host_architecture: 'amd64' },
      /invalid taskData for sbuild: source_package: expected a Debian source package name/,
    ],
    [
      'an option smuggled into a package name',
      'sbuild',
      { source_package: '--foo', host_architecture: 'amd64' },
      /invalid taskData/,
    ],
    ['unknown fields', 'noop', { result: true, run: 'rm -rf /' }, /invalid taskData for noop/],
  ])('refuses %s with a reason', (_, task, data, reason) => {
    const plan = planTask(task, data, ctx);
    expect(plan.kind).toBe('refuse');
    expect((plan as { reason: string }).reason).toMatch(reason);
  });
});
