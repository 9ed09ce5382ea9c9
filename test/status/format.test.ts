import { describe, expect, it } from 'vitest';
import { ago, relative, utc, when } from '../../src/api/status/format.js';

const now = new Date('2026-11-26T12:00:00.000Z');
const at = (iso: string) => new Date(iso);

describe('how the status pages write times', () => {
  it('to the second, in UTC', () => {
    expect(utc(at('2026-11-23T05:12:07.654Z'))).toBe('2026-11-23 05:12:07 UTC');
  });

  it.each([
    ['2026-11-26T11:59:48Z', '12 s ago'],
    ['2026-11-26T11:55:00Z', '5 min ago'],
    ['2026-11-26T09:00:00Z', '3 h ago'],
    ['2026-11-24T11:00:00Z', '2 d ago'],
    ['2026-11-26T12:00:40Z', 'in 40 s'],
    ['2026-11-26T14:30:00Z', 'in 2 h'],
  ])('%s is %s', (iso, text) => {
    expect(relative(at(iso), now)).toBe(text);
  });

  it('an instant with its age', () => {
    expect(when(at('2026-11-26T11:57:30Z'), now)).toBe('2026-11-26 11:57:30 UTC (2 min ago)');
    expect(ago(at('2026-11-20T11:57:30Z'), now)).toBe('2026-11-20 11:57:30 UTC');
  });
});
