import { describe, expect, it } from 'vitest';
import { parseHandlers, splitHandlerList } from '../../src/agent/config.js';
import { TASK_VERSION } from '../../src/agent/facts.js';
import { handlersValue, imageEnvFile } from '../../src/cli/image/agent-files.js';
import {
  imageHandledTasks,
  imagePackages,
  imageTags,
  imageUnhandledTasks,
  qemuSystemPackage,
} from '../../src/cli/image/contents.js';
import { HANDLED_TASKS } from '../../src/cli/image/handlers.js';
import {
  IMAGE_BACKENDS,
  IMAGE_TASKS,
  parseRecipe,
  type ImageBackend,
  type ImageTask,
  type Recipe,
} from '../../src/cli/image/recipe.js';
import { findTask } from '../../src/core/tasks/registry.js';

const BASE = ['arch-test', 'ca-certificates', 'nodejs', 'systemd-sysv'];
const recipe = (over: Record<string, unknown>, arch = 'amd64'): Recipe =>
  parseRecipe({ enable_backends: [], enable_tasks: [], ...over }, arch);
const names = (r: Recipe) => imagePackages(r).map((p) => p.name);
const tags = (r: Recipe) => imageTags(r).map((t) => t.tag);

describe('packages of an image (docs/design.md: images)', () => {
  it('always has the agent runtime and arch-test, and nothing else for an empty recipe', () => {
    expect(names(recipe({}))).toEqual(BASE);
  });

  it.each<[ImageBackend, string, string[]]>([
    ['unshare', 'amd64', ['util-linux', 'iproute2', 'uidmap', 'xz-utils']],
    ['incus-lxc', 'amd64', ['incus']],
    ['incus-vm', 'amd64', ['incus', 'qemu-system-x86']],
    ['incus-vm', 'arm64', ['incus', 'qemu-system-arm']],
    ['qemu', 'amd64', ['qemu-system-x86', 'qemu-utils']],
    ['qemu', 'ppc64el', ['qemu-system-ppc', 'qemu-utils']],
    ['qemu', 's390x', ['qemu-system-s390x', 'qemu-utils']],
    ['qemu', 'riscv64', ['qemu-system-misc', 'qemu-utils']],
  ])('backend %s on %s adds %j', (backend, arch, extra) => {
    const r = recipe({ enable_backends: [backend] }, arch);
    expect(names(r)).toEqual([...new Set([...BASE, ...extra])].sort());
    expect(
      imagePackages(r)
        .filter((p) => extra.includes(p.name))
        .every((p) => p.neededBy.includes(`backend:${backend}`)),
    ).toBe(true);
  });

  it.each<[ImageTask, string[]]>([
    ['sbuild', ['sbuild', 'mmdebstrap']],
    ['autopkgtest', ['autopkgtest']],
    ['mmdebstrap', ['mmdebstrap', 'debootstrap', 'arch-test']],
    [
      'simplesystemimagebuild',
      ['debvm', 'dosfstools', 'e2fsprogs', 'fdisk', 'mtools', 'parted', 'qemu-utils', 'mmdebstrap'],
    ],
    ['debsign', ['devscripts', 'gnupg']],
    ['sign', ['sbsigntool', 'gnupg']],
  ])('task %s adds %j', (task, extra) => {
    const r = recipe({ enable_tasks: [task] });
    expect(names(r)).toEqual([...new Set([...BASE, ...extra])].sort());
  });

  it('lists a package once, with everything that needs it', () => {
    const r = recipe({ enable_backends: ['qemu'], enable_tasks: ['simplesystemimagebuild', 'mmdebstrap'] });
    expect(imagePackages(r).find((p) => p.name === 'qemu-utils')!.neededBy).toEqual([
      'backend:qemu',
      'task:simplesystemimagebuild',
    ]);
    expect(imagePackages(r).find((p) => p.name === 'arch-test')!.neededBy).toEqual(['base', 'task:mmdebstrap']);
    expect(new Set(names(r)).size).toBe(names(r).length);
  });

  it('maps every architecture family to its qemu-system package', () => {
    expect(
      ['amd64', 'i386', 'arm64', 'armhf', 'armel', 'ppc64el', 's390x', 'mips64el', 'riscv64', 'loong64'].map(
        qemuSystemPackage,
      ),
    ).toEqual([
      'qemu-system-x86',
      'qemu-system-x86',
      'qemu-system-arm',
      'qemu-system-arm',
      'qemu-system-arm',
      'qemu-system-ppc',
      'qemu-system-s390x',
      'qemu-system-mips',
      'qemu-system-misc',
      'qemu-system-misc',
    ]);
  });
});

describe('tags of an image', () => {
  it('the default recipe: its architecture, unshare, the tools and the handled tasks', () => {
    expect(imageTags(parseRecipe({}, 'arm64'))).toEqual([
      { tag: 'worker:build-arch:arm64', source: 'recipe:architecture' },
      { tag: 'worker:executor:unshare', source: 'backend:unshare' },
      { tag: 'worker:cap:sbuild', source: 'package:sbuild' },
      { tag: 'worker:cap:autopkgtest', source: 'package:autopkgtest' },
      { tag: 'worker:cap:mmdebstrap', source: 'package:mmdebstrap' },
      { tag: 'worker:task:worker:noop:version:1', source: 'handler:noop' },
      { tag: 'worker:task:worker:autopkgtest:version:1', source: 'handler:autopkgtest' },
      { tag: 'worker:task:worker:sbuild:version:1', source: 'handler:sbuild' },
    ]);
  });

  it.each<[ImageBackend, string | undefined]>([
    ['unshare', undefined],
    ['incus-lxc', undefined],
    ['incus-vm', 'the machine has /dev/kvm'],
    ['qemu', 'the machine has /dev/kvm'],
  ])('backend %s gives worker:executor:%s (condition %s)', (backend, condition) => {
    const entry = imageTags(recipe({ enable_backends: [backend] })).find((t) => t.tag === `worker:executor:${backend}`);
    expect(entry).toEqual({
      tag: `worker:executor:${backend}`,
      source: `backend:${backend}`,
      ...(condition ? { condition } : {}),
    });
  });

  it.each<[ImageTask, string[]]>([
    ['sbuild', ['worker:cap:sbuild', 'worker:cap:mmdebstrap', 'worker:task:worker:sbuild:version:1']],
    ['autopkgtest', ['worker:cap:autopkgtest', 'worker:task:worker:autopkgtest:version:1']],
    ['mmdebstrap', ['worker:cap:mmdebstrap', 'worker:task:worker:mmdebstrap:version:1']],
    ['simplesystemimagebuild', ['worker:cap:mmdebstrap']],
    ['debsign', ['worker:cap:debsign']],
    ['sign', ['worker:cap:sbsign']],
  ])('task %s gives %j beyond the base tags', (task, extra) => {
    const base = ['worker:build-arch:amd64', 'worker:task:worker:noop:version:1'];
    expect(tags(recipe({ enable_tasks: [task] })).sort()).toEqual([...base, ...extra].sort());
  });

  it('takes tool tags from the packages actually installed once built', () => {
    const r = recipe({ enable_tasks: ['sbuild'] });
    // sbuild pulled mmdebstrap in as a dependency: the agent will find it, so the manifest says so.
    expect(imageTags(r, new Set(['sbuild', 'mmdebstrap'])).map((t) => t.tag)).toContain('worker:cap:mmdebstrap');
    expect(imageTags(r, new Set([])).map((t) => t.tag)).not.toContain('worker:cap:sbuild');
  });

  it.each(IMAGE_TASKS.map((t) => [t]))(
    'an image with task %s provides every worker:cap:* the task requires',
    (task) => {
      const samples: Record<ImageTask, unknown> = {
        sbuild: { source_package: 'hello', host_architecture: 'amd64' },
        autopkgtest: { source_package: 'hello', host_architecture: 'amd64' },
        mmdebstrap: {
          bootstrap_options: { architecture: 'amd64' },
          bootstrap_repositories: [{ mirror: 'http://deb.debian.org/debian', suite: 'trixie' }],
        },
        simplesystemimagebuild: {
          bootstrap_options: { architecture: 'amd64' },
          bootstrap_repositories: [{ mirror: 'http://deb.debian.org/debian', suite: 'trixie' }],
          disk_image: { format: 'raw' },
        },
        debsign: { unsigned: 1, key: 'A'.repeat(40) },
        sign: { purpose: 'uefi', unsigned: [1], key: 'db' },
      };
      const definition = findTask(task === 'debsign' || task === 'sign' ? 'signing' : 'worker', task)!;
      const data = definition.schema.parse(samples[task]);
      const required = definition
        .analyze(data, { environment: null, defaultArchitecture: 'amd64' })
        .required.map((t) => t.tag);
      const provided = tags(recipe({ enable_backends: ['unshare'], enable_tasks: [task] }));
      for (const tag of required.filter(
        (t) => t.startsWith('worker:cap:') || t.startsWith('worker:executor:') || t.startsWith('worker:build-arch:'),
      )) {
        expect(provided, `${task} requires ${tag}`).toContain(tag);
      }
    },
  );

  it('promises the task versions the agent reports for its handlers', () => {
    for (const task of HANDLED_TASKS) expect(findTask('worker', task)?.version, task).toBe(TASK_VERSION);
  });

  it('handles noop always, the handled tasks of the recipe, and names the others', () => {
    const r = recipe({ enable_tasks: ['sign', 'sbuild', 'debsign', 'simplesystemimagebuild'] });
    expect(imageHandledTasks(r)).toEqual(['noop', 'sbuild']);
    expect(imageUnhandledTasks(r)).toEqual(['sign', 'debsign', 'simplesystemimagebuild']);
  });
});

describe('image.env', () => {
  it('gives the agent its work directory and a handler per task, and the handler its suite and architecture', () => {
    expect(imageEnvFile({ suite: 'trixie', architecture: 'arm64', tasks: ['noop', 'sbuild'] })).toBe(
      [
        '# Written by tagsched-image. /etc/tagsched-worker/config is read after this file and may override it.',
        'TAGSCHED_WORK_DIR=/var/lib/tagsched-worker',
        'TAGSCHED_HANDLERS=noop=/usr/bin/node /usr/lib/tagsched-worker/tagsched-handler.mjs noop;sbuild=/usr/bin/node /usr/lib/tagsched-worker/tagsched-handler.mjs sbuild',
        'TAGSCHED_IMAGE_SUITE=trixie',
        'TAGSCHED_IMAGE_ARCHITECTURE=arm64',
        '',
      ].join('\n'),
    );
    expect(handlersValue([])).toBe('');
  });

  it('writes handlers the agent reads back as one command per task', () => {
    const handlers = parseHandlers(splitHandlerList(handlersValue(['noop', 'sbuild', 'autopkgtest'])));
    expect([...handlers]).toEqual([
      ['noop', '/usr/bin/node /usr/lib/tagsched-worker/tagsched-handler.mjs noop'],
      ['sbuild', '/usr/bin/node /usr/lib/tagsched-worker/tagsched-handler.mjs sbuild'],
      ['autopkgtest', '/usr/bin/node /usr/lib/tagsched-worker/tagsched-handler.mjs autopkgtest'],
    ]);
  });

  it('every backend and task can be enabled at once', () => {
    const all = recipe({ enable_backends: [...IMAGE_BACKENDS], enable_tasks: [...IMAGE_TASKS] });
    expect(names(all)).toContain('incus');
    expect(tags(all)).toContain('worker:executor:qemu');
  });
});
