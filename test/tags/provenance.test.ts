import { describe, expect, it } from 'vitest';
import { CUSTOM_ONTOLOGY, ONTOLOGIES, ontologyAllows, ontologyOf } from '../../src/core/tags/ontology.js';
import type { Ontology } from '../../src/core/tags/ontology.js';
import { PROVENANCE_TRUST, SET_PROVENANCES, checkContribution, sideOfSet } from '../../src/core/tags/provenance.js';
import { parseTag } from '../../src/core/tags/syntax.js';
import type { ParsedTag } from '../../src/core/tags/syntax.js';
import { PROVENANCES, REFUSAL_CODES, TAG_SET_KINDS } from '../../src/core/tags/types.js';
import type { Provenance, RefusalCode, TagSetKind } from '../../src/core/tags/types.js';

const {
  PROVENANCE_NOT_ALLOWED_FOR_SET: SET,
  PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY: ONTOLOGY,
  PREFIX_NOT_GRANTED_BY_WORKSPACE: PREFIX,
} = REFUSAL_CODES;

function parsed(raw: string, set: TagSetKind): ParsedTag {
  const result = parseTag(raw, sideOfSet(set));
  if (!result.ok) throw new Error(`test tag ${raw} does not parse: ${result.error.message}`);
  return result.tag;
}

describe('ontologyOf', () => {
  it.each<[string, string]>([
    ['worker:build-arch:amd64', 'worker:build-arch:'],
    ['worker:cap:sbuild', 'worker:cap:'],
    ['worker:class:trusted', 'worker:class:'],
    ['worker:executor:unshare', 'worker:executor:'],
    ['worker:executor:auto', 'worker:executor:auto'],
    ['worker:executor:autopilot', 'worker:executor:'],
    ['worker:task:worker:sbuild:version:1', 'worker:task:'],
    ['worker:type:signing', 'worker:type:'],
    ['worker:size:big', 'worker:size:'],
    ['worker:cpu-count=4', 'worker:cpu-count'],
    ['worker:memory-gib>=32', 'worker:memory-gib'],
    ['worker:disk-gib=200', 'worker:disk-gib'],
    ['task:scope:debian', 'task:scope:'],
    ['task:workspace:debian:security', 'task:workspace:'],
    ['task:group:debian::Debian', 'task:group:'],
    ['task:source-package:linux', 'task:source-package:'],
    ['task:cross-target:arm64', 'task:cross-target:'],
  ])('%s belongs to %s', (tag, prefix) => {
    expect(ontologyOf(tag).prefix).toBe(prefix);
  });

  it.each([
    ['site:gpu'],
    ['worker:bogomips=9000'],
    ['worker:cpu-count'],
    ['worker:cpu-counts=4'],
    ['worker:memory-gib-extra>=1'],
    ['Worker:class:trusted'],
    ['worker:class'],
    ['task:scopes:x'],
  ])('%s is a custom tag', (tag) => {
    expect(ontologyOf(tag)).toBe(CUSTOM_ONTOLOGY);
  });

  const broad: Ontology = { prefix: 'worker:', description: 'any worker tag', allowed: ['admin'] };
  const narrow: Ontology = { prefix: 'worker:class:', description: 'classes', allowed: ['system'] };
  const exact: Ontology = { prefix: 'worker:class:x', exact: true, description: 'one class', allowed: ['user'] };
  describe.each([
    ['broad first', [broad, narrow, exact]],
    ['narrow first', [exact, narrow, broad]],
  ])('with overlapping rules (%s), the longest match wins', (_label, table) => {
    it.each<[string, Ontology]>([
      ['worker:class:trusted', narrow],
      ['worker:class:x', exact],
      ['worker:class:xy', narrow],
      ['worker:cap:kvm', broad],
      ['worker:class:', narrow],
      ['site:gpu', CUSTOM_ONTOLOGY],
    ])('%s', (tag, expected) => {
      expect(ontologyOf(tag, table)).toBe(expected);
    });
  });

  it('gives every table prefix a unique entry', () => {
    const keys = ONTOLOGIES.map((o) => `${o.prefix}|${o.exact === true}|${o.valued === true}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it.each<[Ontology, Provenance, boolean]>([
    [ontologyOf('worker:cap:x'), 'worker', true],
    [ontologyOf('worker:class:x'), 'admin', true],
    [ontologyOf('worker:class:x'), 'system', false],
    [CUSTOM_ONTOLOGY, 'worker', false],
    [CUSTOM_ONTOLOGY, 'user', true],
  ])('ontologyAllows(%o, %s) is %s', (ontology, provenance, expected) => {
    expect(ontologyAllows(ontology, provenance)).toBe(expected);
  });
});

describe('the set table of docs/design.md: tags and provenance', () => {
  it('is exactly the design table', () => {
    expect(SET_PROVENANCES).toEqual({
      'worker-provided': ['worker', 'admin', 'system'],
      'worker-required': ['admin'],
      'task-provided': ['user', 'system', 'workspace'],
      'task-required': ['user', 'system', 'workspace'],
    });
  });

  it('ranks trust system > admin > workspace > user > worker', () => {
    const ranked = [...PROVENANCES].sort((a, b) => PROVENANCE_TRUST[b] - PROVENANCE_TRUST[a]);
    expect(ranked).toEqual(['system', 'admin', 'workspace', 'user', 'worker']);
  });

  it.each(TAG_SET_KINDS.map((kind) => [kind, kind.endsWith('-provided') ? 'provided' : 'required']))(
    '%s is on the %s side',
    (kind, side) => {
      expect(sideOfSet(kind)).toBe(side);
    },
  );
});

type Case = [TagSetKind, string, Provenance, RefusalCode | null];

const cases: Case[] = [
  // Workers may claim facts about themselves, but not admin or system classifications nor custom tags.
  ['worker-provided', 'worker:build-arch:amd64', 'worker', null],
  ['worker-provided', 'worker:cap:kvm', 'worker', null],
  ['worker-provided', 'worker:executor:unshare', 'worker', null],
  ['worker-provided', 'worker:task:worker:sbuild:version:1', 'worker', null],
  ['worker-provided', 'worker:size:big', 'worker', null],
  ['worker-provided', 'worker:cpu-count=64', 'worker', null],
  ['worker-provided', 'worker:class:trusted', 'worker', ONTOLOGY],
  ['worker-provided', 'worker:type:server', 'worker', ONTOLOGY],
  ['worker-provided', 'worker:executor:auto', 'worker', ONTOLOGY],
  ['worker-provided', 'site:gpu', 'worker', ONTOLOGY],
  ['worker-provided', 'worker:bogomips=9000', 'worker', ONTOLOGY],
  ['worker-provided', 'worker:cpu-count', 'worker', ONTOLOGY],
  ['worker-provided', 'task:workspace:debian:security', 'worker', ONTOLOGY],
  ['worker-provided', 'worker:class:trusted', 'admin', null],
  ['worker-provided', 'site:gpu', 'admin', null],
  ['worker-provided', 'worker:bogomips=9000', 'admin', null],
  ['worker-provided', 'worker:type:server', 'admin', ONTOLOGY],
  ['worker-provided', 'worker:executor:auto', 'admin', ONTOLOGY],
  ['worker-provided', 'worker:type:worker', 'system', null],
  ['worker-provided', 'worker:class:trusted', 'system', ONTOLOGY],
  ['worker-provided', 'worker:cap:kvm', 'user', SET],
  ['worker-provided', 'worker:cap:kvm', 'workspace', SET],
  // Only admins make workers exclusive; what they require is up to them, except a reserved tag.
  ['worker-required', 'task:workspace:debian:security', 'admin', null],
  ['worker-required', 'site:gpu', 'admin', null],
  ['worker-required', 'worker:executor:auto', 'admin', ONTOLOGY],
  ['worker-required', 'task:workspace:debian:security', 'worker', SET],
  ['worker-required', 'task:workspace:debian:security', 'system', SET],
  ['worker-required', 'task:workspace:debian:security', 'user', SET],
  // Tasks cannot claim where they come from; only the system says so.
  ['task-provided', 'task:workspace:debian:security', 'system', null],
  ['task-provided', 'task:scope:debian', 'system', null],
  ['task-provided', 'task:workspace:debian:security', 'user', ONTOLOGY],
  ['task-provided', 'task:group:debian::Debian', 'workspace', ONTOLOGY],
  ['task-provided', 'task:source-package:linux', 'workspace', ONTOLOGY],
  ['task-provided', 'task:cross-target:arm64', 'user', ONTOLOGY],
  ['task-provided', 'site:gpu', 'workspace', null],
  ['task-provided', 'site:gpu', 'user', PREFIX],
  ['task-provided', 'site:gpu', 'admin', SET],
  ['task-provided', 'site:gpu', 'worker', SET],
  // Required task tags only make a match harder, so any valid tag goes.
  ['task-required', 'worker:class:trusted', 'user', null],
  ['task-required', 'task:workspace:debian:security', 'user', null],
  ['task-required', 'worker:memory-gib>=32', 'user', null],
  ['task-required', 'worker:type:server', 'workspace', null],
  ['task-required', 'site:gpu', 'system', null],
  ['task-required', 'worker:executor:auto', 'system', ONTOLOGY],
  ['task-required', 'worker:cap:sbuild', 'worker', SET],
  ['task-required', 'worker:cap:sbuild', 'admin', SET],
];

describe('checkContribution', () => {
  it.each(cases)('%s: %s from %s → %s', (set, tag, provenance, expected) => {
    const result = checkContribution(set, parsed(tag, set), provenance);
    expect(result?.code ?? null).toBe(expected);
    if (result !== null) {
      expect(result.message).toContain(`tag "${tag}"`);
      expect(result.message).toMatch(new RegExp(`(not|by|here) ${provenance}\\b`));
    }
  });

  it.each<[string, readonly string[] | undefined, RefusalCode | null]>([
    ['site:gpu', undefined, PREFIX],
    ['site:gpu', [], PREFIX],
    ['site:gpu', [''], PREFIX],
    ['site:gpu', ['site:'], null],
    ['site:gpu', ['other:', 'site:g'], null],
    ['site:gpu', ['Site:'], PREFIX],
    ['site:gpu=2', ['site:gpu'], null],
    ['worker:cap:kvm', ['worker:cap:'], null],
    ['task:workspace:debian:security', ['task:'], ONTOLOGY],
    ['task:scope:debian', [''], ONTOLOGY],
  ])('a user providing %s with granted prefixes %j → %s', (tag, prefixes, expected) => {
    const result = checkContribution('task-provided', parsed(tag, 'task-provided'), 'user', {
      userProvidablePrefixes: prefixes,
    });
    expect(result?.code ?? null).toBe(expected);
  });

  it('grants prefixes to users only, not to other provenances', () => {
    const opts = { userProvidablePrefixes: ['task:'] };
    expect(checkContribution('task-provided', parsed('task:scope:x', 'task-provided'), 'workspace', opts)?.code).toBe(
      ONTOLOGY,
    );
  });

  it('lets a user require anything without a grant', () => {
    expect(
      checkContribution('task-required', parsed('site:gpu', 'task-required'), 'user', { userProvidablePrefixes: [] }),
    ).toBeNull();
  });

  it.each<[TagSetKind, string, Provenance, object, string]>([
    [
      'task-provided',
      'task:workspace:debian:security',
      'user',
      {},
      'tag "task:workspace:debian:security" may only be provided by system, not user',
    ],
    [
      'worker-provided',
      'worker:class:trusted',
      'worker',
      {},
      'may only be provided by admin, not worker (ontology "worker:class:")',
    ],
    ['worker-provided', 'site:x', 'worker', {}, 'a worker may not invent custom tags'],
    [
      'worker-provided',
      'worker:executor:auto',
      'worker',
      {},
      'tag "worker:executor:auto" is never valid, whoever adds it (here worker): "auto" is not an executor',
    ],
    [
      'worker-required',
      'site:x',
      'worker',
      {},
      'cannot be added to the worker-required set by worker: only admin may add to it',
    ],
    [
      'task-provided',
      'site:x',
      'user',
      {},
      'may not be provided by user: the workspace grants its members no tag prefixes',
    ],
    [
      'task-provided',
      'site:x',
      'user',
      { userProvidablePrefixes: ['a:', 'b:'] },
      'the workspace grants its members only "a:" or "b:"',
    ],
  ])('explains %s: %s from %s', (set, tag, provenance, opts, phrase) => {
    expect(checkContribution(set, parsed(tag, set), provenance, opts)?.message).toContain(phrase);
  });
});
