import { describe, expect, it } from 'vitest';
import { analyzeWorkRequest } from '../../src/core/tasks/analyze.js';
import { TASKS } from '../../src/core/tasks/registry.js';
import type { EnvironmentFacts } from '../../src/core/tasks/types.js';
import { AMD64_ENV, ARM64_ENV, request, triples } from './fixtures.js';

type Tagged = readonly [tag: string, source: string];

interface Row {
  label: string;
  type: string;
  name: string;
  data: unknown;
  environment?: EnvironmentFacts;
  defaultArchitecture?: string;
  /** The task's own tags, beyond the scope/workspace/type/version tags every request gets. */
  provided: Tagged[];
  required: Tagged[];
}

const ROWS: Row[] = [
  {
    label: 'sbuild native, backend auto means unshare',
    type: 'worker',
    name: 'sbuild',
    data: { source_package: 'hello', host_architecture: 'amd64' },
    provided: [['task:source-package:hello', 'task-data:source_package']],
    required: [
      ['worker:cap:sbuild', 'task-registry'],
      ['worker:build-arch:amd64', 'task-data:host_architecture'],
      ['worker:executor:unshare', 'task-data:backend'],
    ],
  },
  {
    label: 'sbuild in a native environment with an explicit backend',
    type: 'worker',
    name: 'sbuild',
    data: {
      source_package: 'linux',
      host_architecture: 'arm64',
      environment_id: 7,
      backend: 'incus-lxc',
      build_components: ['any', 'all'],
    },
    environment: ARM64_ENV,
    provided: [['task:source-package:linux', 'task-data:source_package']],
    required: [
      ['worker:cap:sbuild', 'task-registry'],
      ['worker:build-arch:arm64', 'environment:7'],
      ['worker:executor:incus-lxc', 'task-data:backend'],
    ],
  },
  {
    label: 'sbuild cross build: amd64 environment for an arm64 host',
    type: 'worker',
    name: 'sbuild',
    data: { source_package: 'g++-14', host_architecture: 'arm64', environment_id: 8 },
    environment: AMD64_ENV,
    provided: [
      ['task:source-package:g++-14', 'task-data:source_package'],
      ['task:cross-target:arm64', 'task-data:host_architecture'],
    ],
    required: [
      ['worker:cap:sbuild', 'task-registry'],
      ['worker:build-arch:amd64', 'environment:8'],
      ['worker:executor:unshare', 'task-data:backend'],
    ],
  },
  {
    label: 'autopkgtest with qemu',
    type: 'worker',
    name: 'autopkgtest',
    data: { source_package: 'python3.13', host_architecture: 'ppc64el', backend: 'qemu' },
    provided: [['task:source-package:python3.13', 'task-data:source_package']],
    required: [
      ['worker:cap:autopkgtest', 'task-registry'],
      ['worker:build-arch:ppc64el', 'task-data:host_architecture'],
      ['worker:executor:qemu', 'task-data:backend'],
    ],
  },
  {
    label: 'autopkgtest cross: arm64 environment for an amd64 host',
    type: 'worker',
    name: 'autopkgtest',
    data: { source_package: 'hello', host_architecture: 'amd64', environment_id: 7, backend: 'incus-vm' },
    environment: ARM64_ENV,
    provided: [
      ['task:source-package:hello', 'task-data:source_package'],
      ['task:cross-target:amd64', 'task-data:host_architecture'],
    ],
    required: [
      ['worker:cap:autopkgtest', 'task-registry'],
      ['worker:build-arch:arm64', 'environment:7'],
      ['worker:executor:incus-vm', 'task-data:backend'],
    ],
  },
  {
    label: 'lintian without architecture takes the configured default',
    type: 'worker',
    name: 'lintian',
    data: {},
    defaultArchitecture: 'riscv64',
    provided: [],
    required: [
      ['worker:build-arch:riscv64', 'default-architecture'],
      ['worker:executor:unshare', 'task-data:backend'],
    ],
  },
  {
    label: 'lintian in an arm64 environment must run on arm64',
    type: 'worker',
    name: 'lintian',
    data: { source_package: 'hello', environment_id: 7 },
    environment: ARM64_ENV,
    provided: [['task:source-package:hello', 'task-data:source_package']],
    required: [
      ['worker:build-arch:arm64', 'environment:7'],
      ['worker:executor:unshare', 'task-data:backend'],
    ],
  },
  {
    label: 'lintian with a host architecture',
    type: 'worker',
    name: 'lintian',
    data: { host_architecture: 'i386', backend: 'unshare', fail_on_severity: 'error' },
    provided: [],
    required: [
      ['worker:build-arch:i386', 'task-data:host_architecture'],
      ['worker:executor:unshare', 'task-data:backend'],
    ],
  },
  {
    label: 'piuparts with incus-vm',
    type: 'worker',
    name: 'piuparts',
    data: { source_package: 'hello', host_architecture: 'armhf', backend: 'incus-vm' },
    provided: [['task:source-package:hello', 'task-data:source_package']],
    required: [
      ['worker:build-arch:armhf', 'task-data:host_architecture'],
      ['worker:executor:incus-vm', 'task-data:backend'],
    ],
  },
  {
    label: 'blhc with no data',
    type: 'worker',
    name: 'blhc',
    data: {},
    provided: [],
    required: [
      ['worker:build-arch:amd64', 'default-architecture'],
      ['worker:executor:unshare', 'task-data:backend'],
    ],
  },
  {
    label: 'blhc in an amd64 environment',
    type: 'worker',
    name: 'blhc',
    data: { source_package: 'hello', host_architecture: 'amd64', environment_id: 8 },
    environment: AMD64_ENV,
    provided: [['task:source-package:hello', 'task-data:source_package']],
    required: [
      ['worker:build-arch:amd64', 'environment:8'],
      ['worker:executor:unshare', 'task-data:backend'],
    ],
  },
  {
    label: 'mmdebstrap for arm64',
    type: 'worker',
    name: 'mmdebstrap',
    data: {
      bootstrap_options: { architecture: 'arm64', variant: 'minbase' },
      bootstrap_repositories: [
        { mirror: 'https://deb.debian.org/debian', suite: 'trixie', components: ['main', 'contrib'] },
      ],
    },
    provided: [],
    required: [
      ['worker:cap:mmdebstrap', 'task-registry'],
      ['worker:build-arch:arm64', 'task-data:bootstrap_options.architecture'],
    ],
  },
  {
    label: 'simplesystemimagebuild for riscv64',
    type: 'worker',
    name: 'simplesystemimagebuild',
    data: {
      bootstrap_options: { architecture: 'riscv64' },
      bootstrap_repositories: [{ mirror: 'http://deb.debian.org/debian', suite: 'sid' }],
      disk_image: { format: 'qcow2', partitions: [{ size: 8, filesystem: 'ext4', mountpoint: '/' }] },
    },
    provided: [],
    required: [
      ['worker:cap:mmdebstrap', 'task-registry'],
      ['worker:build-arch:riscv64', 'task-data:bootstrap_options.architecture'],
    ],
  },
  { label: 'noop', type: 'worker', name: 'noop', data: { result: true }, provided: [], required: [] },
  { label: 'servernoop', type: 'server', name: 'servernoop', data: {}, provided: [], required: [] },
  {
    label: 'debsign',
    type: 'signing',
    name: 'debsign',
    data: { unsigned: 12, key: '0123456789ABCDEF0123456789ABCDEF01234567' },
    provided: [],
    required: [['worker:cap:debsign', 'task-registry']],
  },
  {
    label: 'sign for uefi needs sbsign',
    type: 'signing',
    name: 'sign',
    data: { purpose: 'uefi', unsigned: [3, 4], key: 'deadbeef' },
    provided: [],
    required: [['worker:cap:sbsign', 'task-data:purpose']],
  },
  {
    label: 'sign for openpgp needs no capability',
    type: 'signing',
    name: 'sign',
    data: { purpose: 'openpgp', unsigned: [3], key: '0123456789ABCDEF0123456789ABCDEF01234567' },
    provided: [],
    required: [],
  },
  {
    label: 'generatekey',
    type: 'signing',
    name: 'generatekey',
    data: { purpose: 'uefi', description: 'Secure Boot 2025' },
    provided: [],
    required: [],
  },
  {
    label: 'synchronization_point',
    type: 'internal',
    name: 'synchronization_point',
    data: { step: 'tests-done', display_name: 'Tests done' },
    provided: [],
    required: [],
  },
  {
    label: 'sbuild workflow',
    type: 'workflow',
    name: 'sbuild',
    data: {
      input: { source_package: 'hello', source_artifact: 1 },
      target_distribution: 'debian:trixie',
      architectures: ['amd64', 'arm64'],
      arch_all_host_architecture: 'amd64',
    },
    provided: [],
    required: [],
  },
  {
    label: 'debian_pipeline workflow',
    type: 'workflow',
    name: 'debian_pipeline',
    data: { source_package: 'hello', source_artifact: 5, vendor: 'debian', codename: 'trixie', enable_lintian: true },
    provided: [],
    required: [],
  },
];

function baseRequired(type: string, name: string): Tagged[] {
  if (type === 'internal' || type === 'workflow') return [['worker:type:not-assignable', 'task-registry']];
  return [
    [`worker:type:${type}`, 'task-registry'],
    [`worker:task:${type}:${name}:version:1`, 'task-registry'],
  ];
}

const BASE_PROVIDED: Tagged[] = [
  ['task:scope:debian', 'workspace'],
  ['task:workspace:debian:developers', 'workspace'],
];

function expected(tags: Tagged[]): string[][] {
  return tags.map(([tag, source]) => [tag, 'system', source]).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

describe('task analysis of every registered task', () => {
  it.each(TASKS.map((t) => [`${t.type}/${t.name}`]))('%s has at least one row in the table', (key) => {
    expect(ROWS.map((r) => `${r.type}/${r.name}`)).toContain(key);
  });

  it.each(ROWS)('$label', (row) => {
    const result = analyzeWorkRequest(
      request({
        taskType: row.type,
        taskName: row.name,
        taskData: row.data,
        environment: row.environment ?? null,
        defaultArchitecture: row.defaultArchitecture ?? 'amd64',
      }),
    );
    if (!result.ok) throw new Error(JSON.stringify(result.errors));
    expect(triples(result.provided)).toEqual(expected([...BASE_PROVIDED, ...row.provided]));
    expect(triples(result.required)).toEqual(expected([...baseRequired(row.type, row.name), ...row.required]));
    expect(result.providedTags).toEqual(expected([...BASE_PROVIDED, ...row.provided]).map(([tag]) => tag));
    expect(result.dropped).toEqual([]);
  });

  it.each(ROWS)(
    '$label: analysis never asks for the auto executor nor its own worker type when unassignable',
    (row) => {
      const result = analyzeWorkRequest(
        request({ taskType: row.type, taskName: row.name, taskData: row.data, environment: row.environment ?? null }),
      );
      if (!result.ok) throw new Error(JSON.stringify(result.errors));
      expect(result.requiredTags).not.toContain('worker:executor:auto');
      if (row.type === 'internal' || row.type === 'workflow') {
        expect(result.requiredTags).toEqual(['worker:type:not-assignable']);
      }
    },
  );
});
