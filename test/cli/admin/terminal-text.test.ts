import { describe, expect, it } from 'vitest';
import { terminalSafe, terminalSafeDeep } from '../../../src/cli/admin/terminal-text.js';

describe('terminal-safe text', () => {
  it.each([
    ['plain text', 'plain text'],
    ['\u001b[31mred\u001b[0m', 'red'],
    ['title\u001b]0;owned\u0007 after', 'title after'],
    ['osc with st\u001b]8;;http://x\u001b\\link', 'osc with stlink'],
    ['bell\u0007 backspace\u0008 nul\u0000 del\u007f', 'bell backspace nul del'],
    ['c1 csi\u009b31m', 'c1 csi31m'],
    ['a\r\nb\rc\td', 'a\nb\nc\td'],
    ['lone escape at the end\u001b', 'lone escape at the end'],
  ])('%j → %j', (input, output) => {
    expect(terminalSafe(input)).toBe(output);
  });

  it('cleans every string of GraphQL data, and leaves the rest as it is', () => {
    expect(terminalSafeDeep({ a: ['x\u001b[1m', 2, null], b: { c: '\u0007y', d: true } })).toEqual({ a: ['x', 2, null], b: { c: 'y', d: true } });
  });
});
