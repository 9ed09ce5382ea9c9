import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_EXPRESSION_DEPTH,
  evaluateExpression,
  formatExpression,
  parseExpression,
} from '../../src/core/tags/expression.js';
import type { TagExpression } from '../../src/core/tags/expression.js';

const tag = (t: string): TagExpression => ({ kind: 'tag', tag: t });
const not = (operand: TagExpression): TagExpression => ({ kind: 'not', operand });
const and = (...operands: TagExpression[]): TagExpression => ({ kind: 'and', operands });
const or = (...operands: TagExpression[]): TagExpression => ({ kind: 'or', operands });

function parse(src: string): TagExpression {
  const result = parseExpression(src);
  if (!result.ok) throw new Error(`${src}: ${result.error.message}`);
  return result.expression;
}

describe('parseExpression', () => {
  it.each<[string, TagExpression]>([
    ['a', tag('a')],
    ['task:source-package:linux', tag('task:source-package:linux')],
    ['worker:memory-gib>=32', tag('worker:memory-gib>=32')],
    ['worker:memory-gib=32', tag('worker:memory-gib=32')],
    ['a and b', and(tag('a'), tag('b'))],
    ['a or b', or(tag('a'), tag('b'))],
    ['not a', not(tag('a'))],
    ['not not a', not(not(tag('a')))],
    ['a and b and c', and(tag('a'), tag('b'), tag('c'))],
    ['a or b or c', or(tag('a'), tag('b'), tag('c'))],
    ['a or b and c', or(tag('a'), and(tag('b'), tag('c')))],
    ['a and b or c', or(and(tag('a'), tag('b')), tag('c'))],
    ['not a and b', and(not(tag('a')), tag('b'))],
    ['not a or b', or(not(tag('a')), tag('b'))],
    ['a and not b or c', or(and(tag('a'), not(tag('b'))), tag('c'))],
    ['(a or b) and c', and(or(tag('a'), tag('b')), tag('c'))],
    ['not (a or b)', not(or(tag('a'), tag('b')))],
    ['(a and b) and c', and(and(tag('a'), tag('b')), tag('c'))],
    ['((a))', tag('a')],
    ['(a)and(b)', and(tag('a'), tag('b'))],
    ['  a\tand\n b  ', and(tag('a'), tag('b'))],
    ['AND and Or', and(tag('AND'), tag('Or'))],
    ['nota and andy', and(tag('nota'), tag('andy'))],
    [
      'task:source-package:linux or task:source-package:libreoffice',
      or(tag('task:source-package:linux'), tag('task:source-package:libreoffice')),
    ],
  ])('%j', (src, expected) => {
    expect(parseExpression(src)).toEqual({ ok: true, expression: expected });
  });

  it.each<[string, string, number]>([
    ['', 'empty expression', 0],
    [' \t\n', 'empty expression', 0],
    ['a and', 'expected a tag or "(" at position 5, got the end of the expression', 5],
    ['not', 'expected a tag or "(" at position 3, got the end of the expression', 3],
    ['a b', 'expected "and", "or" or the end of the expression at position 2, got "b"', 2],
    ['a not b', 'expected "and", "or" or the end of the expression at position 2, got "not"', 2],
    ['a (b)', 'expected "and", "or" or the end of the expression at position 2, got "("', 2],
    ['a and b)', 'unbalanced ")" at position 7', 7],
    [')', 'expected a tag or "(" at position 0, got ")"', 0],
    ['(a and b', 'unbalanced "(" at position 0: missing ")"', 0],
    ['a and ((b or c)', 'unbalanced "(" at position 6: missing ")"', 6],
    ['()', 'expected a tag or "(" at position 1, got ")"', 1],
    ['(a b)', 'expected "and", "or" or ")" at position 3, got "b"', 3],
    ['and a', 'unexpected "and" at position 0: expected a tag or "("', 0],
    ['a or or b', 'unexpected "or" at position 5: expected a tag or "("', 5],
    ['not and', 'unexpected "and" at position 4: expected a tag or "("', 4],
  ])('%j fails: %s', (src, message, position) => {
    expect(parseExpression(src)).toEqual({ ok: false, error: { message, position } });
  });

  it.each<[string, number, string]>([
    ['a and foo!bar', 6, 'tag "foo!bar" is invalid: only A-Z'],
    ['x>=abc', 0, 'must be a non-negative decimal number'],
    ['x>=-1 or y', 0, 'must be a non-negative decimal number'],
    ['a or x=1>=2', 5, 'a value "=N" is only allowed on provided tags'],
  ])('reports the bad tag in %j at position %i', (src, position, phrase) => {
    const result = parseExpression(src);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.position).toBe(position);
    expect(result.error.message).toContain(`invalid tag at position ${position}: `);
    expect(result.error.message).toContain(phrase);
  });

  it.each([
    ['parentheses', `${'('.repeat(MAX_EXPRESSION_DEPTH + 1)}a${')'.repeat(MAX_EXPRESSION_DEPTH + 1)}`],
    ['not', `${'not '.repeat(MAX_EXPRESSION_DEPTH + 1)}a`],
    ['both', `${'not ('.repeat(10_000)}a`],
  ])('refuses nesting too deep (%s) without exhausting the stack', (_label, src) => {
    const result = parseExpression(src);
    expect(result.ok).toBe(false);
    expect(result.ok ? '' : result.error.message).toContain('nested too deeply');
  });

  it('accepts nesting up to the limit', () => {
    const src = `${'('.repeat(MAX_EXPRESSION_DEPTH)}a${')'.repeat(MAX_EXPRESSION_DEPTH)}`;
    expect(parseExpression(src)).toEqual({ ok: true, expression: tag('a') });
  });
});

describe('evaluateExpression', () => {
  const tags = [
    'task:source-package:linux',
    'worker:memory-gib=64',
    'worker:cpu-count=4',
    'Site:Gpu',
    'task:scope:debian',
  ];
  it.each<[string, boolean]>([
    ['task:source-package:linux', true],
    ['task:source-package:libreoffice', false],
    ['task:source-package:linux or task:source-package:libreoffice', true],
    ['task:source-package:linux and task:source-package:libreoffice', false],
    ['not task:source-package:libreoffice', true],
    ['not not task:source-package:linux', true],
    ['site:gpu', false],
    ['Site:Gpu', true],
    ['task:source-package:', false],
    ['task:source-package:lin', false],
    ['worker:memory-gib>=32', true],
    ['worker:memory-gib>=64', true],
    ['worker:memory-gib>=64.5', false],
    ['worker:memory-gib=64', true],
    ['worker:memory-gib=32', false],
    ['worker:memory-gib', false],
    ['worker:disk-gib>=0', false],
    ['a or task:scope:debian and not worker:cpu-count>=8', true],
    ['(a or task:scope:debian) and worker:cpu-count>=8', false],
    ['not (a or b)', true],
    ['not a and b', false],
  ])('%s → %s', (src, expected) => {
    expect(evaluateExpression(parse(src), tags)).toBe(expected);
  });

  it('reads a set, an array or a one-shot iterable alike', () => {
    const expression = parse('a and x>=2');
    function* once(): Generator<string> {
      yield 'a';
      yield 'x=3';
    }
    expect(evaluateExpression(expression, new Set(['a', 'x=3']))).toBe(true);
    expect(evaluateExpression(expression, ['a', 'x=3'])).toBe(true);
    expect(evaluateExpression(expression, once())).toBe(true);
  });

  it('sees a requirement in a set that mixes provided and required tags', () => {
    expect(evaluateExpression(parse('worker:memory-gib>=32'), ['worker:memory-gib>=32'])).toBe(true);
  });

  it.each<[TagExpression, boolean]>([
    [and(), true],
    [or(), false],
    [and(tag('a')), true],
    [or(tag('b')), false],
  ])('treats hand-built degenerate nodes %o as %s', (expression, expected) => {
    expect(evaluateExpression(expression, ['a'])).toBe(expected);
  });
});

describe('formatExpression', () => {
  it.each<[string, string]>([
    ['a', 'a'],
    ['  a   and   b ', 'a and b'],
    ['(a)', 'a'],
    ['a or (b and c)', 'a or b and c'],
    ['(a or b) and c', '(a or b) and c'],
    ['(a and b) and c', '(a and b) and c'],
    ['a or (b or c)', 'a or (b or c)'],
    ['not (a)', 'not a'],
    ['not (a and b)', 'not (a and b)'],
    ['(not a) and b', 'not a and b'],
    ['not not a', 'not not a'],
    ['x>=1 or not (y=2 and z)', 'x>=1 or not (y=2 and z)'],
  ])('%j → %j', (src, canonical) => {
    expect(formatExpression(parse(src))).toBe(canonical);
  });

  it.each<[TagExpression, string]>([
    [and(tag('a')), 'a'],
    [not(and(tag('a'), tag('b'))), 'not (a and b)'],
    [or(and(tag('a'), tag('b')), not(tag('c'))), 'a and b or not c'],
  ])('formats hand-built %o as %j', (expression, text) => {
    expect(formatExpression(expression)).toBe(text);
  });

  it('refuses an empty operator, which has no textual form', () => {
    expect(() => formatExpression(and())).toThrow(RangeError);
  });
});

describe('expression properties', () => {
  const atom = fc
    .oneof(
      fc.constantFrom('a', 'b', 'AND', 'nota', 'task:source-package:linux', 'worker:memory-gib'),
      fc.stringMatching(/^[A-Za-z0-9:._+~-]{1,12}$/).filter((t) => !['and', 'or', 'not'].includes(t)),
      fc.tuple(fc.constantFrom('worker:memory-gib', 'x'), fc.nat(100)).map(([n, v]) => `${n}>=${v}`),
      fc.tuple(fc.constantFrom('worker:cpu-count', 'x'), fc.nat(100)).map(([n, v]) => `${n}=${v}`),
    )
    .map(tag);
  const { expression } = fc.letrec<{ expression: TagExpression }>((rec) => ({
    expression: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      atom,
      rec('expression').map(not),
      fc.array(rec('expression'), { minLength: 2, maxLength: 4 }).map((ops) => and(...ops)),
      fc.array(rec('expression'), { minLength: 2, maxLength: 4 }).map((ops) => or(...ops)),
    ),
  }));
  const runs = { numRuns: 300 };

  it('formatExpression round-trips through parseExpression', () => {
    fc.assert(
      fc.property(expression, (e) => {
        expect(parseExpression(formatExpression(e))).toEqual({ ok: true, expression: e });
      }),
      runs,
    );
  });

  it('not negates, and evaluation agrees with the formatted form', () => {
    const tagSets = fc.array(
      fc.constantFrom('a', 'b', 'AND', 'x=5', 'x>=3', 'worker:cpu-count=8', 'worker:memory-gib'),
    );
    fc.assert(
      fc.property(expression, tagSets, (e, tags) => {
        expect(evaluateExpression(not(e), tags)).toBe(!evaluateExpression(e, tags));
        expect(evaluateExpression(parse(formatExpression(e)), tags)).toBe(evaluateExpression(e, tags));
      }),
      runs,
    );
  });
});
