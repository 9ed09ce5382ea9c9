import { describe, expect, it } from 'vitest';
import {
  MAX_NUMBER_LENGTH,
  MAX_TAG_LENGTH,
  TAG_SYNTAX_RULES,
  parseTag,
  quoteTag,
  validateTagList,
} from '../../src/core/tags/syntax.js';
import type { ParsedTag } from '../../src/core/tags/syntax.js';
import type { TagSide } from '../../src/core/tags/types.js';

const longest = 'a'.repeat(MAX_TAG_LENGTH);

describe('parseTag accepts', () => {
  it.each<[string, TagSide, ParsedTag]>([
    [
      'worker:build-arch:amd64',
      'provided',
      { raw: 'worker:build-arch:amd64', name: 'worker:build-arch:amd64', kind: 'plain' },
    ],
    [
      'worker:build-arch:amd64',
      'required',
      { raw: 'worker:build-arch:amd64', name: 'worker:build-arch:amd64', kind: 'plain' },
    ],
    ['Az09:._+~-', 'provided', { raw: 'Az09:._+~-', name: 'Az09:._+~-', kind: 'plain' }],
    [
      'task:group:debian::Debian',
      'provided',
      { raw: 'task:group:debian::Debian', name: 'task:group:debian::Debian', kind: 'plain' },
    ],
    ['x', 'required', { raw: 'x', name: 'x', kind: 'plain' }],
    [longest, 'provided', { raw: longest, name: longest, kind: 'plain' }],
    [`${longest}=1`, 'provided', { raw: `${longest}=1`, name: longest, kind: 'value', value: 1 }],
    [
      'worker:memory-gib=64',
      'provided',
      { raw: 'worker:memory-gib=64', name: 'worker:memory-gib', kind: 'value', value: 64 },
    ],
    [
      'worker:memory-gib=0',
      'provided',
      { raw: 'worker:memory-gib=0', name: 'worker:memory-gib', kind: 'value', value: 0 },
    ],
    [
      'worker:bogomips=2.5',
      'provided',
      { raw: 'worker:bogomips=2.5', name: 'worker:bogomips', kind: 'value', value: 2.5 },
    ],
    ['x=0.05', 'provided', { raw: 'x=0.05', name: 'x', kind: 'value', value: 0.05 }],
    [
      `x=1${'0'.repeat(MAX_NUMBER_LENGTH - 1)}`,
      'provided',
      {
        raw: `x=1${'0'.repeat(MAX_NUMBER_LENGTH - 1)}`,
        name: 'x',
        kind: 'value',
        value: 10 ** (MAX_NUMBER_LENGTH - 1),
      },
    ],
    [
      'worker:memory-gib>=32',
      'required',
      { raw: 'worker:memory-gib>=32', name: 'worker:memory-gib', kind: 'minimum', minimum: 32 },
    ],
    [
      'worker:cpu-count>=0',
      'required',
      { raw: 'worker:cpu-count>=0', name: 'worker:cpu-count', kind: 'minimum', minimum: 0 },
    ],
    ['x>=1.5', 'required', { raw: 'x>=1.5', name: 'x', kind: 'minimum', minimum: 1.5 }],
  ])('%s on the %s side', (raw, side, expected) => {
    expect(parseTag(raw, side)).toEqual({ ok: true, tag: expected });
  });

  it('keeps case, since matching is case-sensitive', () => {
    const parsed = parseTag('Worker:Build-Arch:AMD64', 'provided');
    expect(parsed.ok && parsed.tag.name).toBe('Worker:Build-Arch:AMD64');
  });
});

describe('parseTag refuses', () => {
  it.each<[string, string, TagSide, string]>([
    ['an empty tag', '', 'provided', TAG_SYNTAX_RULES.EMPTY],
    ['a value without a name', '=3', 'provided', TAG_SYNTAX_RULES.EMPTY],
    ['a minimum without a name', '>=3', 'required', TAG_SYNTAX_RULES.EMPTY],
    ['a space', 'foo bar', 'provided', TAG_SYNTAX_RULES.BAD_CHARACTERS],
    ['leading whitespace', ' foo', 'required', TAG_SYNTAX_RULES.BAD_CHARACTERS],
    ['a trailing newline', 'foo\n', 'provided', TAG_SYNTAX_RULES.BAD_CHARACTERS],
    ['a tab', 'foo\tbar', 'provided', TAG_SYNTAX_RULES.BAD_CHARACTERS],
    ['a non-ASCII letter', 'worker:cap:café', 'provided', TAG_SYNTAX_RULES.BAD_CHARACTERS],
    ['a slash', 'worker:cap:a/b', 'provided', TAG_SYNTAX_RULES.BAD_CHARACTERS],
    ['a comparison other than >=', 'x>3', 'required', TAG_SYNTAX_RULES.BAD_CHARACTERS],
    ['a name one character too long', 'a'.repeat(MAX_TAG_LENGTH + 1), 'provided', TAG_SYNTAX_RULES.TOO_LONG],
    ['a too long name with a value', `${'a'.repeat(MAX_TAG_LENGTH + 1)}=1`, 'provided', TAG_SYNTAX_RULES.TOO_LONG],
    ['a value on the required side', 'worker:memory-gib=32', 'required', TAG_SYNTAX_RULES.VALUE_ON_REQUIRED_SIDE],
    ['a minimum on the provided side', 'worker:memory-gib>=32', 'provided', TAG_SYNTAX_RULES.MINIMUM_ON_PROVIDED_SIDE],
    ['a negative number', 'x=-1', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a plus sign', 'x>=+1', 'required', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['an exponent', 'x=1e3', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a leading zero', 'x=064', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a trailing fractional zero', 'x=2.50', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a bare dot', 'x=1.', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a leading dot', 'x>=.5', 'required', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a missing number', 'x=', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a missing minimum', 'x>=', 'required', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['a word', 'x=abc', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    ['two values', 'x=1=2', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
    [
      'a number of 401 characters (too large for a double, and over the cap)',
      `x=1${'0'.repeat(400)}`,
      'provided',
      TAG_SYNTAX_RULES.NUMBER_TOO_LONG,
    ],
    [
      'a number one character over the cap',
      `x>=1${'0'.repeat(MAX_NUMBER_LENGTH)}`,
      'required',
      TAG_SYNTAX_RULES.NUMBER_TOO_LONG,
    ],
    ['a fraction over the cap', `x=0.${'0'.repeat(MAX_NUMBER_LENGTH)}1`, 'provided', TAG_SYNTAX_RULES.NUMBER_TOO_LONG],
    ['a space after the value', 'x=1 ', 'provided', TAG_SYNTAX_RULES.BAD_NUMBER],
  ])('%s: %j on the %s side', (_label, raw, side, rule) => {
    const parsed = parseTag(raw, side);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error.rule).toBe(rule);
    expect(parsed.error.tag).toBe(raw);
    expect(parsed.error.message).toContain(`tag ${quoteTag(raw)} is invalid: `);
  });

  it('names the characters that are allowed and the one that is not', () => {
    const parsed = parseTag('foo bar', 'provided');
    expect(parsed).toEqual({
      ok: false,
      error: {
        tag: 'foo bar',
        rule: 'bad-characters',
        message:
          'tag "foo bar" is invalid: only A-Z a-z 0-9 and : . _ + ~ - are allowed (no whitespace); found " " at position 3',
      },
    });
  });

  it.each<[string, TagSide, string]>([
    ['', 'provided', 'must not be empty'],
    ['a'.repeat(300), 'provided', 'the name is 300 characters long, at most 255 are allowed'],
    ['x=1', 'required', 'a required tag states a minimum ">=N"'],
    ['x>=1', 'provided', 'a provided tag states a value "=N"'],
    ['x=1e3', 'provided', 'non-negative decimal number'],
  ])('explains the rule broken by %j on the %s side', (raw, side, phrase) => {
    const parsed = parseTag(raw, side);
    expect(parsed.ok ? '' : parsed.error.message).toContain(phrase);
  });

  it('quotes a long tag only in part, and escapes control characters', () => {
    const parsed = parseTag(`${'a'.repeat(1000)}\n`, 'provided');
    const message = parsed.ok ? '' : parsed.error.message;
    expect(message.length).toBeLessThan(300);
    expect(message).toContain('found "\\n" at position 1000');
  });
});

describe('validateTagList', () => {
  it('returns every error, in list order', () => {
    const errors = validateTagList(['ok', 'bad tag', 'x>=1', 'y=2', ''], 'provided');
    expect(errors.map((e) => [e.tag, e.rule])).toEqual([
      ['bad tag', 'bad-characters'],
      ['x>=1', 'minimum-on-provided-side'],
      ['', 'empty'],
    ]);
  });

  it.each<[TagSide]>([['provided'], ['required']])('returns nothing for a clean %s list', (side) => {
    expect(validateTagList(['worker:cap:sbuild', 'site:gpu'], side)).toEqual([]);
  });
});
