import { describe, expect, it } from 'vitest';
import { analyzeWorkRequest, validateTaskInput } from '../../src/core/tasks/analyze.js';
import { AMD64_ENV, request } from './fixtures.js';

describe('validateTaskInput', () => {
  it.each([
    {
      label: 'missing field',
      name: 'sbuild',
      data: { source_package: 'hello' },
      path: 'taskData.host_architecture',
      message: 'taskData.host_architecture: expected string, received undefined',
    },
    {
      label: 'unknown key',
      name: 'sbuild',
      data: { source_package: 'hello', host_architecture: 'amd64', host_arch: 'amd64' },
      path: 'taskData.host_arch',
      message: 'taskData.host_arch: unknown key',
    },
    {
      label: 'wrong type',
      name: 'autopkgtest',
      data: { source_package: 'hello', host_architecture: 'amd64', environment_id: '7' },
      path: 'taskData.environment_id',
      message: 'taskData.environment_id: expected number, received string',
    },
    {
      label: 'non-positive id',
      name: 'lintian',
      data: { environment_id: 0 },
      path: 'taskData.environment_id',
      message: 'taskData.environment_id: expected number to be >0',
    },
    {
      label: 'bad architecture name',
      name: 'piuparts',
      data: { host_architecture: 'AMD64' },
      path: 'taskData.host_architecture',
      message: 'taskData.host_architecture: expected a Debian architecture name such as amd64',
    },
    {
      label: 'bad source package name',
      name: 'blhc',
      data: { source_package: 'Hello World' },
      path: 'taskData.source_package',
      message: 'taskData.source_package: expected a Debian source package name such as hello',
    },
    {
      label: 'unknown backend',
      name: 'sbuild',
      data: { source_package: 'hello', host_architecture: 'amd64', backend: 'docker' },
      path: 'taskData.backend',
      message: 'taskData.backend: expected one of "auto"|"unshare"|"incus-lxc"|"incus-vm"|"qemu"',
    },
    {
      label: 'nested path into an array',
      name: 'mmdebstrap',
      data: {
        bootstrap_options: { architecture: 'amd64' },
        bootstrap_repositories: [{ mirror: 'https://deb.debian.org/debian' }],
      },
      path: 'taskData.bootstrap_repositories[0].suite',
      message: 'taskData.bootstrap_repositories[0].suite: expected string, received undefined',
    },
    {
      label: 'empty repository list',
      name: 'mmdebstrap',
      data: { bootstrap_options: { architecture: 'amd64' }, bootstrap_repositories: [] },
      path: 'taskData.bootstrap_repositories',
      message: 'taskData.bootstrap_repositories: expected array to have >=1 items',
    },
    {
      label: 'taskData that is not an object',
      name: 'noop',
      data: 'please',
      path: 'taskData',
      message: 'taskData: expected object, received string',
    },
  ])('refuses worker/$name with a $label', ({ name, data, path, message }) => {
    const result = validateTaskInput('worker', name, data);
    expect(result).toEqual({ ok: false, error: { code: 'INVALID_TASK_DATA', path, message } });
  });

  it('names every bad field in one message', () => {
    const result = validateTaskInput('worker', 'sbuild', { source_package: 3, backend: 'auto', extra: true });
    if (result.ok) throw new Error('expected a failure');
    expect(result.error.path).toBe('taskData.source_package');
    expect(result.error.message.split('; ')).toEqual([
      'taskData.source_package: expected string, received number',
      'taskData.host_architecture: expected string, received undefined',
      'taskData.extra: unknown key',
    ]);
  });

  it.each([
    ['signing', 'debsign', { unsigned: 1, key: 'not-a-fingerprint' }, 'taskData.key'],
    ['signing', 'sign', { purpose: 'uefi', unsigned: [], key: 'k' }, 'taskData.unsigned'],
    ['signing', 'sign', { purpose: 'x509', unsigned: [1], key: 'k' }, 'taskData.purpose'],
    ['signing', 'generatekey', { purpose: 'openpgp' }, 'taskData.description'],
    ['internal', 'synchronization_point', {}, 'taskData.step'],
    ['server', 'servernoop', { result: 'yes' }, 'taskData.result'],
    [
      'worker',
      'simplesystemimagebuild',
      {
        bootstrap_options: { architecture: 'amd64' },
        bootstrap_repositories: [{ mirror: 'https://deb.debian.org/debian', suite: 'sid' }],
        disk_image: { format: 'vmdk' },
      },
      'taskData.disk_image.format',
    ],
    [
      'workflow',
      'sbuild',
      { input: { source_artifact: 1 }, target_distribution: 'debian:trixie', architectures: ['amd64'] },
      'taskData.input.source_package',
    ],
    [
      'workflow',
      'sbuild',
      { input: { source_package: 'hello' }, target_distribution: 'trixie', architectures: ['amd64'] },
      'taskData.target_distribution',
    ],
    [
      'workflow',
      'sbuild',
      {
        input: { source_package: 'hello' },
        target_distribution: 'debian:trixie',
        architectures: ['amd64'],
        enable_upload: true,
      },
      'taskData.enable_upload',
    ],
    [
      'workflow',
      'debian_pipeline',
      { source_package: 'hello', source_artifact: 1, vendor: 'debian' },
      'taskData.codename',
    ],
    [
      'workflow',
      'debian_pipeline',
      { source_package: 'hello', vendor: 'debian', codename: 'trixie', enable_lintian: 'yes' },
      'taskData.enable_lintian',
    ],
  ])('refuses %s/%s data at %s', (type, name, data, path) => {
    const result = validateTaskInput(type, name, data);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatchObject({ code: 'INVALID_TASK_DATA', path });
  });

  it('fills defaults and reports the environment id', () => {
    const result = validateTaskInput('worker', 'sbuild', {
      source_package: 'hello',
      host_architecture: 'amd64',
      environment_id: 8,
    });
    if (!result.ok) throw new Error(result.error.message);
    expect(result.data).toEqual({
      source_package: 'hello',
      host_architecture: 'amd64',
      environment_id: 8,
      backend: 'auto',
    });
    expect(result.environmentId).toBe(8);
    expect(result.task.type).toBe('worker');
  });

  it.each([
    [
      'worker',
      'nosuch',
      'taskName',
      'unknown worker task "nosuch"; known worker tasks: autopkgtest, blhc, lintian, mmdebstrap, noop, piuparts, sbuild, simplesystemimagebuild',
    ],
    ['signing', 'sbuild', 'taskName', 'unknown signing task "sbuild"; known signing tasks: debsign, generatekey, sign'],
    [
      'batch',
      'noop',
      'taskType',
      'unknown task type "batch"; known types: worker, server, signing, internal, workflow',
    ],
  ])('refuses unknown task %s/%s', (type, name, path, message) => {
    expect(validateTaskInput(type, name, {})).toEqual({ ok: false, error: { code: 'UNKNOWN_TASK', path, message } });
  });
});

describe('analyzeWorkRequest input errors', () => {
  it('fails on invalid task data and writes no tags', () => {
    const result = analyzeWorkRequest(request({ taskName: 'sbuild', taskData: { source_package: 'hello' } }));
    expect(result).toEqual({
      ok: false,
      errors: [
        {
          code: 'INVALID_TASK_DATA',
          path: 'taskData.host_architecture',
          message: 'taskData.host_architecture: expected string, received undefined',
        },
      ],
    });
  });

  it('fails on an unknown task', () => {
    const result = analyzeWorkRequest(request({ taskName: 'nosuch' }));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors.map((e) => e.code)).toEqual(['UNKNOWN_TASK']);
  });

  it.each([
    ['no environment found', null],
    ['another environment found', AMD64_ENV],
  ])('fails on an unknown environment (%s)', (_label, environment) => {
    const result = analyzeWorkRequest(request({ taskName: 'lintian', taskData: { environment_id: 99 }, environment }));
    expect(result).toEqual({
      ok: false,
      errors: [
        { code: 'UNKNOWN_ENVIRONMENT', path: 'taskData.environment_id', message: 'environment 99 does not exist' },
      ],
    });
  });

  it('ignores an environment the task data does not name', () => {
    const result = analyzeWorkRequest(
      request({ taskName: 'lintian', taskData: {}, environment: { ...AMD64_ENV, architecture: 's390x' } }),
    );
    expect(result.ok && result.requiredTags).toContain('worker:build-arch:amd64');
  });

  it('reports bad task data and bad user tags together', () => {
    const result = analyzeWorkRequest(
      request({ taskName: 'sbuild', taskData: {}, userRequiredTags: ['has space'], userProvidedTags: [''] }),
    );
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors.map((e) => [e.code, e.path])).toEqual([
        ['INVALID_TASK_DATA', 'taskData.source_package'],
        ['INVALID_TAG', 'providedTags[0]'],
        ['INVALID_TAG', 'requiredTags[0]'],
      ]);
    }
  });
});
