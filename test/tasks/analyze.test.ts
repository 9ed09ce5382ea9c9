import { describe, expect, it } from 'vitest';
import { analyzeWorkRequest } from '../../src/core/tasks/analyze.js';
import type { TaskRule, WorkRequestAnalysis } from '../../src/core/tasks/analyze.js';
import { request, sbuildRequest, triples } from './fixtures.js';

function success(result: WorkRequestAnalysis): Extract<WorkRequestAnalysis, { ok: true }> {
  if (!result.ok) throw new Error(`analysis failed: ${JSON.stringify(result.errors)}`);
  return result;
}

function rule(overrides: Partial<TaskRule> & { name: string }): TaskRule {
  return { taskName: null, expression: null, providedTags: [], requiredTags: [], ...overrides };
}

describe('system tags of every request', () => {
  it('provides scope, workspace and one tag per creator group', () => {
    const result = success(
      analyzeWorkRequest(
        request({
          creatorGroups: [
            { scope: 'debian', workspace: null, name: 'Debian' },
            { scope: 'debian', workspace: 'developers', name: 'uploaders' },
          ],
        }),
      ),
    );
    expect(triples(result.provided)).toEqual([
      ['task:group:debian::Debian', 'system', 'group:Debian'],
      ['task:group:debian:developers:uploaders', 'system', 'group:uploaders'],
      ['task:scope:debian', 'system', 'workspace'],
      ['task:workspace:debian:developers', 'system', 'workspace'],
    ]);
    expect(triples(result.required)).toEqual([
      ['worker:task:worker:noop:version:1', 'system', 'task-registry'],
      ['worker:type:worker', 'system', 'task-registry'],
    ]);
  });

  it.each([
    [
      'signing',
      'generatekey',
      { purpose: 'openpgp', description: 'archive key' },
      ['worker:task:signing:generatekey:version:1', 'worker:type:signing'],
    ],
    ['server', 'servernoop', {}, ['worker:task:server:servernoop:version:1', 'worker:type:server']],
    ['internal', 'synchronization_point', { step: 's' }, ['worker:type:not-assignable']],
  ])('requires the worker type of a %s task', (taskType, taskName, taskData, required) => {
    expect(success(analyzeWorkRequest(request({ taskType, taskName, taskData }))).requiredTags).toEqual(required);
  });

  it('fails when a group name cannot be a tag, rather than dropping the group', () => {
    const result = analyzeWorkRequest(
      request({ creatorGroups: [{ scope: 'debian', workspace: null, name: 'Debian Developers' }] }),
    );
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.errors).toMatchObject([{ code: 'INVALID_TAG', tag: 'task:group:debian::Debian Developers' }]);
  });
});

describe('user tags', () => {
  it('accepts required tags freely, with provenance user', () => {
    const result = success(
      analyzeWorkRequest(sbuildRequest({ userRequiredTags: ['worker:class:large', 'worker:memory-gib>=32'] })),
    );
    expect(triples(result.required).filter(([, provenance]) => provenance === 'user')).toEqual([
      ['worker:class:large', 'user', 'user-input'],
      ['worker:memory-gib>=32', 'user', 'user-input'],
    ]);
  });

  it.each([
    { label: 'a custom tag without a grant', tags: ['debian:flavour:fast'], prefixes: [], codes: ['TAG_NOT_ALLOWED'] },
    {
      label: 'a system-only ontology even with a granted prefix',
      tags: ['task:scope:other'],
      prefixes: ['task:'],
      codes: ['TAG_NOT_ALLOWED'],
    },
    {
      label: 'another workspace even with a granted prefix',
      tags: ['task:workspace:debian:security'],
      prefixes: ['task:workspace:'],
      codes: ['TAG_NOT_ALLOWED'],
    },
    {
      label: 'every bad tag at once',
      tags: ['debian:a', 'task:source-package:linux', 'bad tag'],
      prefixes: [],
      codes: ['TAG_NOT_ALLOWED', 'TAG_NOT_ALLOWED', 'INVALID_TAG'],
    },
  ])('refuses provided $label and fails the whole analysis', ({ tags, prefixes, codes }) => {
    const result = analyzeWorkRequest(sbuildRequest({ userProvidedTags: tags, userProvidablePrefixes: prefixes }));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors.map((e) => e.code)).toEqual(codes);
      for (const error of result.errors) expect(error.message).toContain(error.tag);
    }
  });

  it('names every refused provided tag, not just the first', () => {
    const result = analyzeWorkRequest(sbuildRequest({ userProvidedTags: ['debian:a', 'task:source-package:linux'] }));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors.map((e) => [e.code, e.tag, e.path])).toEqual([
        ['TAG_NOT_ALLOWED', 'debian:a', 'providedTags[0]'],
        ['TAG_NOT_ALLOWED', 'task:source-package:linux', 'providedTags[1]'],
      ]);
    }
  });

  it('accepts a provided tag under a prefix the workspace grants', () => {
    const result = success(
      analyzeWorkRequest(
        sbuildRequest({ userProvidedTags: ['debian:flavour:fast'], userProvidablePrefixes: ['debian:flavour:'] }),
      ),
    );
    expect(triples(result.provided)).toContainEqual(['debian:flavour:fast', 'user', 'user-input']);
  });
});

describe('task rules', () => {
  const large = rule({
    name: 'big-packages',
    expression: 'task:source-package:linux or task:source-package:libreoffice',
    requiredTags: ['worker:class:large'],
  });

  it.each([
    {
      label: 'by task name',
      rules: [rule({ name: 'r', taskName: 'sbuild', requiredTags: ['worker:class:x'] })],
      pkg: 'hello',
      applies: true,
    },
    {
      label: 'by task name, other task',
      rules: [rule({ name: 'r', taskName: 'autopkgtest', requiredTags: ['worker:class:x'] })],
      pkg: 'hello',
      applies: false,
    },
    {
      label: 'by expression, true',
      rules: [rule({ name: 'r', expression: 'task:source-package:linux', requiredTags: ['worker:class:x'] })],
      pkg: 'linux',
      applies: true,
    },
    {
      label: 'by expression, false',
      rules: [rule({ name: 'r', expression: 'task:source-package:linux', requiredTags: ['worker:class:x'] })],
      pkg: 'hello',
      applies: false,
    },
    {
      label: 'by both',
      rules: [
        rule({
          name: 'r',
          taskName: 'sbuild',
          expression: 'worker:build-arch:amd64 and not task:cross-target:arm64',
          requiredTags: ['worker:class:x'],
        }),
      ],
      pkg: 'hello',
      applies: true,
    },
    {
      label: 'by both, name mismatch',
      rules: [
        rule({
          name: 'r',
          taskName: 'lintian',
          expression: 'worker:build-arch:amd64',
          requiredTags: ['worker:class:x'],
        }),
      ],
      pkg: 'hello',
      applies: false,
    },
    {
      label: 'unconditionally',
      rules: [rule({ name: 'r', requiredTags: ['worker:class:x'] })],
      pkg: 'hello',
      applies: true,
    },
  ])('applies a workspace rule $label: $applies', ({ rules, pkg, applies }) => {
    const result = success(
      analyzeWorkRequest(
        sbuildRequest({ taskData: { source_package: pkg, host_architecture: 'amd64' }, workspaceRules: rules }),
      ),
    );
    const entry = ['worker:class:x', 'workspace', 'workspace-rule:r'];
    if (applies) expect(triples(result.required)).toContainEqual(entry);
    else expect(result.requiredTags).not.toContain('worker:class:x');
  });

  it.each([
    ['linux', true],
    ['libreoffice', true],
    ['hello', false],
  ])('site rule for big packages on %s applies: %s', (pkg, applies) => {
    const result = success(
      analyzeWorkRequest(
        sbuildRequest({ taskData: { source_package: pkg, host_architecture: 'amd64' }, siteRules: [large] }),
      ),
    );
    expect(triples(result.required).some((t) => t.join() === 'worker:class:large,system,site-rule:big-packages')).toBe(
      applies,
    );
  });

  it('evaluates every rule over the pre-rule set, so rules do not chain', () => {
    const first = rule({ name: 'first', providedTags: ['debian:stage:one'] });
    const second = rule({ name: 'second', expression: 'debian:stage:one', requiredTags: ['worker:class:two'] });
    const result = success(analyzeWorkRequest(sbuildRequest({ workspaceRules: [first, second] })));
    expect(result.providedTags).toContain('debian:stage:one');
    expect(result.requiredTags).not.toContain('worker:class:two');
  });

  it('sees user tags in the pre-rule set', () => {
    const result = success(
      analyzeWorkRequest(
        sbuildRequest({
          userRequiredTags: ['worker:cap:kvm'],
          workspaceRules: [rule({ name: 'kvm', expression: 'worker:cap:kvm', requiredTags: ['worker:class:vm-host'] })],
        }),
      ),
    );
    expect(result.requiredTags).toContain('worker:class:vm-host');
  });

  it('drops and lists a system-only provided tag from a workspace rule, and keeps its required tag', () => {
    const sneaky = rule({
      name: 'sneaky',
      providedTags: ['task:scope:other', 'debian:ok'],
      requiredTags: ['worker:type:server'],
    });
    const result = success(analyzeWorkRequest(sbuildRequest({ workspaceRules: [sneaky] })));
    expect(result.providedTags).not.toContain('task:scope:other');
    expect(triples(result.provided)).toContainEqual(['debian:ok', 'workspace', 'workspace-rule:sneaky']);
    expect(triples(result.required)).toContainEqual(['worker:type:server', 'workspace', 'workspace-rule:sneaky']);
    expect(result.dropped).toMatchObject([
      { tag: 'task:scope:other', provenance: 'workspace', source: 'workspace-rule:sneaky', set: 'task-provided' },
    ]);
  });

  it('lets a site rule provide a system-only tag', () => {
    const site = rule({ name: 'scope-alias', providedTags: ['task:scope:debian-lts'] });
    const result = success(analyzeWorkRequest(sbuildRequest({ siteRules: [site] })));
    expect(triples(result.provided)).toContainEqual(['task:scope:debian-lts', 'system', 'site-rule:scope-alias']);
    expect(result.dropped).toEqual([]);
  });

  it.each([
    {
      label: 'an expression that does not parse',
      bad: rule({ name: 'broken', expression: 'task:source-package:linux or (' }),
      tag: undefined,
    },
    {
      label: 'a provided tag with bad syntax',
      bad: rule({ name: 'broken', providedTags: ['no spaces allowed'] }),
      tag: 'no spaces allowed',
    },
    {
      label: 'a required tag with bad syntax',
      bad: rule({ name: 'broken', requiredTags: ['worker:memory-gib=32'] }),
      tag: 'worker:memory-gib=32',
    },
  ])('fails on a rule with $label, naming the rule', ({ bad, tag }) => {
    const result = analyzeWorkRequest(sbuildRequest({ workspaceRules: [large, bad] }));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.errors).toHaveLength(1);
      expect(result.errors[0].code).toBe('INVALID_RULE');
      expect(result.errors[0].tag).toBe(tag);
      expect(result.errors[0].message).toContain('workspace rule "broken"');
    }
  });

  it('ignores a broken rule for another task name', () => {
    const other = rule({ name: 'broken', taskName: 'lintian', expression: '((' });
    expect(analyzeWorkRequest(sbuildRequest({ siteRules: [other] })).ok).toBe(true);
  });
});

describe('determinism', () => {
  it('gives the same sets whatever the order of groups, user tags and rules', () => {
    const groups = [
      { scope: 'debian', workspace: null, name: 'Debian' },
      { scope: 'debian', workspace: 'developers', name: 'uploaders' },
    ];
    const rules = [
      rule({ name: 'a', requiredTags: ['worker:class:a'] }),
      rule({ name: 'b', providedTags: ['task:scope:x', 'debian:b'] }),
    ];
    const tags = ['worker:class:large', 'worker:cap:kvm'];
    const one = analyzeWorkRequest(
      sbuildRequest({ creatorGroups: groups, workspaceRules: rules, userRequiredTags: tags }),
    );
    const two = analyzeWorkRequest(
      sbuildRequest({
        creatorGroups: [...groups].reverse(),
        workspaceRules: [...rules].reverse(),
        userRequiredTags: [...tags].reverse(),
      }),
    );
    expect(two).toEqual(one);
  });

  it('lists a tag added twice once per provenance and source', () => {
    const result = success(
      analyzeWorkRequest(
        sbuildRequest({
          userRequiredTags: ['worker:class:large', 'worker:class:large'],
          siteRules: [rule({ name: 'large', requiredTags: ['worker:class:large'] })],
        }),
      ),
    );
    expect(triples(result.required).filter(([tag]) => tag === 'worker:class:large')).toEqual([
      ['worker:class:large', 'system', 'site-rule:large'],
      ['worker:class:large', 'user', 'user-input'],
    ]);
    expect(result.requiredTags.filter((t) => t === 'worker:class:large')).toHaveLength(1);
  });
});
