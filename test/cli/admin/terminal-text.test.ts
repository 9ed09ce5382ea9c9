import { describe, expect, it } from 'vitest';
import { terminalSafe, terminalSafeDeep, terminalSafeOutput } from '../../../src/cli/admin/terminal-text.js';

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
    expect(terminalSafeDeep({ a: ['x\u001b[1m', 2, null], b: { c: '\u0007y', d: true } })).toEqual({
      a: ['x', 2, null],
      b: { c: 'y', d: true },
    });
  });

  it.each([
    ['\u001b[1;31mred\u001b[0m kept', '\u001b[1;31mred\u001b[0m kept'],
    ['title\u001b]0;owned\u0007 after', 'title after'],
    ['link\u001b]8;;http://x\u001b\\text', 'linktext'],
    ['cursor\u001b[2J\u001b[Hhome\u001b[5A', 'cursorhome'],
    ['c1 csi\u009b2J bell\u0007', 'c1 csi2J bell'],
    ['progress 10%\rprogress 20%\r\n', 'progress 10%\nprogress 20%\n'],
    ['lone escape\u001b', 'lone escape'],
  ])('job output on a terminal: %j → %j (colours only)', (input, output) => {
    expect(terminalSafeOutput(input)).toBe(output);
  });
});
