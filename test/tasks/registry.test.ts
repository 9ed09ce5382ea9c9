import { describe, expect, it } from 'vitest';
import { imageTags } from '../../src/core/tags/pool-image.js';
import { TASKS, WORKER_TASK_CATALOG, findTask } from '../../src/core/tasks/registry.js';
import { TASK_TYPES } from '../../src/core/tasks/types.js';

describe('task registry', () => {
  it('identifies each task by its type and name once', () => {
    const keys = TASKS.map((t) => `${t.type}/${t.name}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it.each([
    ['worker', 'sbuild', 'worker'],
    ['workflow', 'sbuild', 'workflow'],
    ['signing', 'sign', 'signing'],
    ['internal', 'synchronization_point', 'internal'],
  ])('finds %s/%s', (type, name, expectedType) => {
    expect(findTask(type, name)?.type).toBe(expectedType);
    expect(findTask(type, name)?.name).toBe(name);
  });

  it.each([
    ['worker', 'nosuchtask'],
    ['server', 'sbuild'],
    ['nosuchtype', 'noop'],
  ])('finds nothing for %s/%s', (type, name) => {
    expect(findTask(type, name)).toBeUndefined();
  });

  it.each(TASKS.map((t) => [`${t.type}/${t.name}`, t] as const))('%s is well formed', (_key, task) => {
    expect(TASK_TYPES).toContain(task.type);
    expect(task.name).toMatch(/^[a-z0-9_]+$/);
    expect(Number.isInteger(task.version) && task.version > 0).toBe(true);
    expect(task.description.length).toBeGreaterThan(0);
  });
});

describe('the tools a task declares', () => {
  const ctx = { environment: null, defaultArchitecture: 'amd64' };
  // Data of each task that needs a tool, with every variant of what its analysis requires.
  const examples: [string, string, Record<string, unknown>][] = [
    ['worker', 'sbuild', { source_package: 'hello', host_architecture: 'arm64', backend: 'qemu' }],
    ['worker', 'autopkgtest', { source_package: 'hello', host_architecture: 'amd64' }],
    [
      'worker',
      'mmdebstrap',
      {
        bootstrap_options: { architecture: 'riscv64' },
        bootstrap_repositories: [{ mirror: 'http://deb.debian.org/debian', suite: 'trixie' }],
      },
    ],
    [
      'worker',
      'simplesystemimagebuild',
      {
        bootstrap_options: { architecture: 'amd64' },
        bootstrap_repositories: [{ mirror: 'http://deb.debian.org/debian', suite: 'trixie' }],
        disk_image: { format: 'qcow2', partitions: [{ size: 2, filesystem: 'ext4' }] },
      },
    ],
    ['worker', 'lintian', {}],
    ['signing', 'debsign', { unsigned: 1, key: 'A'.repeat(40) }],
    ['signing', 'sign', { purpose: 'uefi', unsigned: [1], key: 'k' }],
    ['signing', 'sign', { purpose: 'openpgp', unsigned: [1], key: 'k' }],
  ];

  it.each(examples)(
    '%s/%s: its analysis requires no tool it does not declare, and an image built for it provides what it requires',
    (type, name, data) => {
      const task = findTask(type, name)!;
      const parsed = task.schema.safeParse(data);
      expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
      const required = task.analyze(parsed.data, ctx).required.map((t) => t.tag);
      const tools = required.filter((t) => t.startsWith('worker:cap:')).map((t) => t.slice('worker:cap:'.length));
      expect(task.tools ?? []).toEqual(expect.arrayContaining(tools));
      // What the analysis requires of a worker's tools and tasks, an image that enables this task provides.
      const catalog = WORKER_TASK_CATALOG.find((t) => t.type === type && t.name === name)!;
      const image = imageTags({ enableTasks: [name] }, WORKER_TASK_CATALOG).map((t) => t.tag);
      expect(image).toEqual(
        expect.arrayContaining([
          ...tools.map((tool) => `worker:cap:${tool}`),
          `worker:task:${type}:${name}:version:${catalog.version}`,
        ]),
      );
    },
  );

  it('the catalog lists every worker and signing task, with its tools', () => {
    expect(WORKER_TASK_CATALOG.map((t) => `${t.type}/${t.name}`).sort()).toEqual(
      TASKS.filter((t) => t.type === 'worker' || t.type === 'signing')
        .map((t) => `${t.type}/${t.name}`)
        .sort(),
    );
    expect(WORKER_TASK_CATALOG.find((t) => t.name === 'sbuild')).toEqual({
      type: 'worker',
      name: 'sbuild',
      version: 1,
      tools: ['sbuild'],
    });
  });
});
