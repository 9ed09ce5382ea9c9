import { describe, expect, it } from 'vitest';
import { TagSetBuilder, isRefusal } from '../../src/core/tags/tag-set.js';
import { REFUSAL_CODES } from '../../src/core/tags/types.js';
import type { Provenance, TagEntry, TagRefusal, TagSetKind } from '../../src/core/tags/types.js';

describe('TagSetBuilder.add', () => {
  it('returns the entry of an accepted tag', () => {
    const set = new TagSetBuilder('worker-provided');
    expect(set.add('worker:cap:sbuild', 'worker', 'dynamic-metadata')).toEqual({
      tag: 'worker:cap:sbuild',
      provenance: 'worker',
      source: 'dynamic-metadata',
    });
  });

  it.each<[TagSetKind, string, Provenance, string]>([
    ['worker-provided', 'bad tag', 'admin', REFUSAL_CODES.INVALID_SYNTAX],
    ['worker-provided', 'worker:memory-gib>=32', 'admin', REFUSAL_CODES.INVALID_SYNTAX],
    ['task-required', 'worker:memory-gib=32', 'user', REFUSAL_CODES.INVALID_SYNTAX],
    ['worker-provided', 'worker:class:trusted', 'worker', REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY],
    ['worker-required', 'site:x', 'worker', REFUSAL_CODES.PROVENANCE_NOT_ALLOWED_FOR_SET],
    ['task-provided', 'site:x', 'user', REFUSAL_CODES.PREFIX_NOT_GRANTED_BY_WORKSPACE],
  ])('%s refuses %s from %s with %s', (kind, tag, provenance, code) => {
    const set = new TagSetBuilder(kind);
    const result = set.add(tag, provenance, 'src');
    expect(isRefusal(result)).toBe(true);
    expect(result).toMatchObject({ tag, provenance, source: 'src', set: kind, code });
    expect(set.refusals()).toEqual([result]);
    expect(set.entries()).toEqual([]);
    expect(set.tags()).toEqual([]);
  });

  it('uses the syntax message for syntax refusals', () => {
    const result = new TagSetBuilder('task-required').add('x=1', 'user', 'user-input');
    expect(isRefusal(result) && result.message).toContain('a value "=N" is only allowed on provided tags');
  });

  it('applies the workspace grant given to the builder', () => {
    const set = new TagSetBuilder('task-provided', { userProvidablePrefixes: ['site:'] });
    expect(isRefusal(set.add('site:gpu', 'user', 'user-input'))).toBe(false);
    expect(isRefusal(set.add('other:gpu', 'user', 'user-input'))).toBe(true);
  });
});

describe('provenance tracking', () => {
  it('keeps one entry per distinct (tag, provenance, source), and each tag once in tags()', () => {
    const set = new TagSetBuilder('worker-provided');
    set.add('worker:cap:kvm', 'worker', 'dynamic-metadata');
    set.add('worker:cap:kvm', 'admin', 'static-metadata');
    set.add('worker:cap:kvm', 'admin', 'pool:p');
    set.add('worker:cap:kvm', 'worker', 'dynamic-metadata');
    expect(set.entries()).toEqual([
      { tag: 'worker:cap:kvm', provenance: 'worker', source: 'dynamic-metadata' },
      { tag: 'worker:cap:kvm', provenance: 'admin', source: 'static-metadata' },
      { tag: 'worker:cap:kvm', provenance: 'admin', source: 'pool:p' },
    ]);
    expect(set.tags()).toEqual(['worker:cap:kvm']);
  });

  it('records a repeated refusal once', () => {
    const set = new TagSetBuilder('worker-provided');
    set.addAll(['site:x', 'site:x'], 'worker', 'dynamic-metadata');
    expect(set.refusals()).toHaveLength(1);
  });

  it('sorts tags() by code point, not by locale', () => {
    const set = new TagSetBuilder('worker-provided');
    set.addAll(['b', 'a', 'B', 'A', '~', '_', 'a:b', 'a-b', 'a'], 'admin', 'static-metadata');
    expect(set.tags()).toEqual(['A', 'B', '_', 'a', 'a-b', 'a:b', 'b', '~']);
  });

  it('keeps entries and refusals in the order they were added', () => {
    const set = new TagSetBuilder('worker-provided');
    set.addAll(['z', 'bad tag', 'a', 'worker:type:x'], 'admin', 'static-metadata');
    expect(set.entries().map((e) => e.tag)).toEqual(['z', 'a']);
    expect(set.refusals().map((r) => r.tag)).toEqual(['bad tag', 'worker:type:x']);
  });

  it('records refusals decided outside the set', () => {
    const set = new TagSetBuilder('worker-provided');
    const refusal = set.refuse('42', 'worker', 'dynamic-metadata', REFUSAL_CODES.INVALID_SYNTAX, 'not a string');
    expect(refusal.set).toBe('worker-provided');
    expect(set.refusals()).toEqual([refusal]);
  });
});

type Contribution = [Provenance, string];

describe('valued tags on a provided set', () => {
  const name = 'worker:memory-gib';
  it.each<[string, Contribution[], string, Contribution[]]>([
    [
      'a more trusted later value wins',
      [
        ['worker', '8'],
        ['admin', '32'],
      ],
      '32',
      [['worker', '8']],
    ],
    [
      'a less trusted later value loses',
      [
        ['admin', '32'],
        ['worker', '8'],
      ],
      '32',
      [['worker', '8']],
    ],
    [
      'on equal trust the first one wins',
      [
        ['admin', '32'],
        ['admin', '64'],
      ],
      '32',
      [['admin', '64']],
    ],
    [
      'system beats admin',
      [
        ['admin', '32'],
        ['system', '16'],
      ],
      '16',
      [['admin', '32']],
    ],
    [
      'the winner can change twice',
      [
        ['worker', '8'],
        ['admin', '32'],
        ['system', '16'],
      ],
      '16',
      [
        ['worker', '8'],
        ['admin', '32'],
      ],
    ],
    [
      'equal values never conflict',
      [
        ['worker', '32'],
        ['admin', '32'],
      ],
      '32',
      [],
    ],
    [
      'entries agreeing with the winner stay whatever their trust',
      [
        ['worker', '16'],
        ['admin', '32'],
        ['system', '16'],
      ],
      '16',
      [['admin', '32']],
    ],
  ])('%s', (_label, contributions, winner, losers) => {
    const set = new TagSetBuilder('worker-provided');
    for (const [provenance, value] of contributions) set.add(`${name}=${value}`, provenance, provenance);
    expect(set.tags()).toEqual([`${name}=${winner}`]);
    const refused = set.refusals();
    expect(refused.map((r): Contribution => [r.provenance, r.tag.slice(name.length + 1)])).toEqual(losers);
    for (const r of refused) {
      expect(r.code).toBe(REFUSAL_CODES.VALUE_OVERRIDDEN);
      expect(r.message).toContain(`"${r.tag}"`);
      expect(r.message).toContain(`"${name}=${winner}"`);
    }
    const kept = set.entries().filter((e) => e.tag.startsWith(name));
    expect(kept.length + refused.length).toBe(contributions.length);
  });

  it('follows workspace > user on task-provided sets', () => {
    const set = new TagSetBuilder('task-provided', { userProvidablePrefixes: ['site:'] });
    set.add('site:priority=1', 'user', 'user-input');
    set.add('site:priority=5', 'workspace', 'workspace-rule:r');
    expect(set.tags()).toEqual(['site:priority=5']);
    expect(set.refusals()[0]).toMatchObject({ tag: 'site:priority=1', code: REFUSAL_CODES.VALUE_OVERRIDDEN });
  });

  it('tells what add() decided, and re-adding a displaced entry reports its refusal', () => {
    const set = new TagSetBuilder('worker-provided');
    const first = set.add('worker:cpu-count=2', 'worker', 'dynamic-metadata');
    expect(isRefusal(first)).toBe(false);
    const second = set.add('worker:cpu-count=4', 'admin', 'pool:p:specifications');
    expect(isRefusal(second)).toBe(false);
    const again = set.add('worker:cpu-count=2', 'worker', 'dynamic-metadata');
    expect(isRefusal(again) && again.code).toBe(REFUSAL_CODES.VALUE_OVERRIDDEN);
    expect((again as TagRefusal).message).toBe(
      'tag "worker:cpu-count=2" from worker (dynamic-metadata) is overridden by "worker:cpu-count=4" from admin ' +
        '(pool:p:specifications): a valued tag has one value per set, and admin is trusted more than worker',
    );
  });

  it('names the equal-trust rule when the first one wins', () => {
    const set = new TagSetBuilder('worker-provided');
    set.add('x=1', 'admin', 'a');
    const loser = set.add('x=2', 'admin', 'b');
    expect((loser as TagRefusal).message).toContain('both are trusted alike and the first one added wins');
  });

  it('keeps values of different names apart, and plain tags of the same name untouched', () => {
    const set = new TagSetBuilder('worker-provided');
    set.addAll(['worker:cpu-count=2', 'worker:disk-gib=2', 'site:cpu'], 'admin', 'static-metadata');
    set.add('worker:cpu-count=8', 'worker', 'dynamic-metadata');
    expect(set.tags()).toEqual(['site:cpu', 'worker:cpu-count=2', 'worker:disk-gib=2']);
  });
});

describe('valued tags on a required set', () => {
  it('keeps every minimum, since all of them must hold', () => {
    const set = new TagSetBuilder('task-required');
    set.add('worker:memory-gib>=8', 'user', 'user-input');
    set.add('worker:memory-gib>=32', 'workspace', 'workspace-rule:big');
    set.add('worker:memory-gib>=16', 'system', 'task');
    expect(set.tags()).toEqual(['worker:memory-gib>=16', 'worker:memory-gib>=32', 'worker:memory-gib>=8']);
    expect(set.refusals()).toEqual([]);
  });
});

describe('isRefusal', () => {
  it.each<[TagEntry | TagRefusal, boolean]>([
    [{ tag: 'a', provenance: 'admin', source: 's' }, false],
    [
      { tag: 'a', provenance: 'admin', source: 's', set: 'worker-provided', code: 'INVALID_SYNTAX', message: 'm' },
      true,
    ],
  ])('%o → %s', (x, expected) => {
    expect(isRefusal(x)).toBe(expected);
  });
});
