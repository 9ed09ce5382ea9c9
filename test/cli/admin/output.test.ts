/** Tables that fit the terminal, and the parsing of command-line values (pure: no server). */
import { describe, expect, it } from 'vitest';
import { expiryOf, instantArg, integer, items, lifetimeSeconds } from '../../../src/cli/admin/arguments.js';
import { AdminError, EXIT, exitCodeOf } from '../../../src/cli/admin/exit-codes.js';
import { ago, createOutput, fitWidths, renderTable } from '../../../src/cli/admin/output.js';

const sink = { write: () => true };
const out = (columns: number | undefined, isTTY = true) =>
  createOutput(sink, { json: false, isTTY, columns, noColor: true });

describe('fitWidths', () => {
  it.each([
    ['fits already', [10, 20, 5], [true, true, false], [8, 8, 5], 80, [10, 20, 5]],
    ['not a terminal: untouched', [10, 200, 5], [true, true, false], [8, 8, 5], null, [10, 200, 5]],
    ['the widest is cut first, down to the next widest', [30, 60, 5], [true, true, false], [8, 8, 5], 80, [30, 41, 5]],
    ['then both together', [30, 60, 5], [true, true, false], [8, 8, 5], 50, [20, 21, 5]],
    ['never below the minimums', [30, 60, 5], [true, true, false], [8, 8, 5], 10, [8, 8, 5]],
    ['only shrinkable columns', [30, 60, 5], [false, true, false], [8, 8, 5], 60, [30, 21, 5]],
  ])('%s', (_name, natural, shrink, min, width, expected) => {
    expect(fitWidths(natural, shrink, min, width)).toEqual(expected);
  });
});

describe('renderTable', () => {
  const rows = [
    { name: 'build-1', tags: 'worker:cap:sbuild, worker:build-arch:amd64, worker:executor:unshare', n: 2 },
    { name: 'arm-1', tags: null, n: 10 },
  ];
  const columns = [
    { header: 'NAME', value: (r: (typeof rows)[number]) => r.name },
    { header: 'N', value: (r: (typeof rows)[number]) => r.n, align: 'right' as const },
    { header: 'TAGS', value: (r: (typeof rows)[number]) => r.tags, shrink: true },
  ];

  it('aligns columns, right-aligns numbers, and shows "-" for nothing', () => {
    expect(renderTable(out(undefined, false), rows, columns)).toBe(
      [
        'NAME      N  TAGS',
        'build-1   2  worker:cap:sbuild, worker:build-arch:amd64, worker:executor:unshare',
        'arm-1    10  -',
        '',
      ].join('\n'),
    );
  });

  it('cuts shrinkable cells with "…" to fit the terminal', () => {
    const text = renderTable(out(40), rows, columns);
    for (const line of text.trimEnd().split('\n')) expect(line.length).toBeLessThanOrEqual(40);
    expect(text).toContain('build-1   2  worker:cap:sbuild, worker:…\n');
  });

  it('keeps rows on one line whatever the values hold', () => {
    expect(renderTable(out(undefined, false), [{ name: 'a\nb\tc', tags: '', n: 1 }], columns)).toBe(
      'NAME   N  TAGS\na b c  1  -\n',
    );
  });

  it('says "(none)" for no rows', () => {
    expect(renderTable(out(80), [], columns)).toBe('(none)\n');
  });
});

describe('values of the command line', () => {
  it('integers within bounds', () => {
    expect(integer('--n', '12', 1)).toBe(12);
    for (const bad of ['1.5', 'two', '', '0']) expect(() => integer('--n', bad, 1)).toThrow(AdminError);
  });

  it('lifetimes and instants', () => {
    expect(lifetimeSeconds('--x', '90d')).toBe(90 * 86_400);
    expect(lifetimeSeconds('--x', '2w')).toBe(14 * 86_400);
    expect(() => lifetimeSeconds('--x', '0d')).toThrow(/positive count/);
    expect(instantArg('--x', '2027-01-01')).toBe('2027-01-01T00:00:00.000Z');
    expect(instantArg('--x', '2027-01-01T12:00:00+02:00')).toBe('2027-01-01T10:00:00.000Z');
    expect(() => instantArg('--x', '2027-01-01T12:00:00')).toThrow(/time zone/);
    expect(expiryOf({ expiresIn: '1h' }, Date.parse('2027-01-01T00:00:00Z'))).toBe('2027-01-01T01:00:00.000Z');
    expect(expiryOf({})).toBeUndefined();
    try {
      expiryOf({ expires: '2027-01-01', expiresIn: '1d' });
      expect.unreachable();
    } catch (err) {
      expect((err as AdminError).exitCode).toBe(EXIT.usage);
    }
  });

  it('comma-separated lists keep everything else, whitespace included (the server judges tags)', () => {
    expect(items(['a,b', 'c', ' d , ', 'e f'])).toEqual(['a', 'b', 'c', 'd', 'e f']);
  });

  it('ages', () => {
    const now = Date.parse('2027-01-01T12:00:00Z');
    expect(ago('2027-01-01T11:59:30Z', now)).toBe('30s ago');
    expect(ago('2027-01-01T09:00:00Z', now)).toBe('3h ago');
    expect(ago('2027-01-03T12:00:00Z', now)).toBe('in 2d');
    expect(ago(null, now)).toBe('-');
  });
});

describe('exit codes', () => {
  it.each([
    ['UNAUTHENTICATED', 2],
    ['RATE_LIMITED', 2],
    ['NOT_FOUND', 3],
    ['INVALID_TAG', 4],
    ['LIMIT_EXCEEDED', 4],
    ['FORBIDDEN', 5],
    ['ALREADY_EXISTS', 6],
    ['INVALID_STATE', 6],
    ['INTERNAL_SERVER_ERROR', 1],
    ['A_CODE_OF_A_NEWER_SERVER', 1],
  ])('%s → %d', (code, exit) => {
    expect(exitCodeOf(code)).toBe(exit);
  });
});
