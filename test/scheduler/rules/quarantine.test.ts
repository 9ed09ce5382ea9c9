/**
 * The quarantine rule's decisions (src/scheduler/rules/quarantine.ts), table-driven: only an ERROR
 * may quarantine, a SUCCESS lifts; the last results must all be errors, as many as the setting; the
 * reason names the tasks and the success elsewhere. The rule in the database, with real completions,
 * is pinned by test/faults/quarantine-probe.test.ts and test/api/completion-paths.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  erroredTasks,
  liftsQuarantine,
  mayQuarantine,
  quarantineReason,
} from '../../../src/scheduler/rules/quarantine.js';

const r = (result: string | null, taskName = 'sbuild') => ({ result, taskName });

describe('the quarantine rule', () => {
  it('which results may quarantine or lift', () => {
    expect(['SUCCESS', 'FAILURE', 'ERROR', 'SKIPPED'].map((x) => [mayQuarantine(x, 2), liftsQuarantine(x)])).toEqual([
      [false, true],
      [false, false],
      [true, false],
      [false, false],
    ]);
    expect(mayQuarantine('ERROR', 0)).toBe(false);
  });

  it('the last results must be as many errors as the setting', () => {
    const cases: [ReturnType<typeof r>[], string[] | null][] = [
      [
        [r('ERROR', 'b'), r('ERROR', 'a'), r('ERROR', 'b')],
        ['a', 'b'],
      ],
      [[r('ERROR'), r('ERROR')], null],
      [[r('ERROR'), r('FAILURE'), r('ERROR')], null],
    ];
    expect(cases.map(([last]) => erroredTasks(last, 3))).toEqual(cases.map(([, tasks]) => tasks));
  });

  it('the reason names the tasks and the success elsewhere', () => {
    expect(quarantineReason(3, ['a', 'b'], { taskName: 'a', worker: 'w2' })).toBe(
      'its last 3 results are ERROR (a, b) while a succeeded on w2',
    );
  });
});
