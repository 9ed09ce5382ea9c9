import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { matchTags, missingTags } from '../../src/core/tags/match.js';

describe('missingTags', () => {
  it.each<[string, string[], string[], string[]]>([
    ['nothing required, nothing provided', [], [], []],
    ['nothing required', [], ['worker:cap:sbuild'], []],
    ['something required, nothing provided', ['worker:cap:sbuild'], [], ['worker:cap:sbuild']],
    ['equal sets', ['a', 'b'], ['b', 'a'], []],
    ['required is a subset', ['a'], ['a', 'b', 'c'], []],
    ['required is a superset', ['a', 'b', 'c'], ['b'], ['a', 'c']],
    ['disjoint', ['a', 'b'], ['c'], ['a', 'b']],
    [
      'case matters',
      ['worker:build-arch:amd64'],
      ['Worker:build-arch:amd64', 'worker:build-arch:AMD64'],
      ['worker:build-arch:amd64'],
    ],
    ['another architecture', ['worker:build-arch:amd64'], ['worker:build-arch:i386'], ['worker:build-arch:amd64']],
    [
      'a provided prefix does not match',
      ['worker:build-arch:amd64'],
      ['worker:build-arch:amd'],
      ['worker:build-arch:amd64'],
    ],
    [
      'a provided extension does not match',
      ['worker:build-arch:amd'],
      ['worker:build-arch:amd64'],
      ['worker:build-arch:amd'],
    ],
    ['a namespace does not match its members', ['worker:cap:'], ['worker:cap:sbuild'], ['worker:cap:']],
    ['a minimum at the value', ['worker:memory-gib>=32'], ['worker:memory-gib=32'], []],
    ['a minimum above the value', ['worker:memory-gib>=32'], ['worker:memory-gib=31.5'], ['worker:memory-gib>=32']],
    ['a minimum below the value', ['worker:memory-gib>=32'], ['worker:memory-gib=64'], []],
    ['a fractional minimum', ['x>=2.5'], ['x=2.5'], []],
    ['a zero minimum needs the name', ['x>=0'], [], ['x>=0']],
    ['a zero minimum with a zero value', ['x>=0'], ['x=0'], []],
    [
      'a minimum is not met by the plain name',
      ['worker:memory-gib>=32'],
      ['worker:memory-gib'],
      ['worker:memory-gib>=32'],
    ],
    [
      'a minimum is not met by another name',
      ['worker:memory-gib>=32'],
      ['worker:disk-gib=64'],
      ['worker:memory-gib>=32'],
    ],
    [
      'a minimum is not met by a prefix name',
      ['worker:memory-gib>=32'],
      ['worker:memory-gi=64'],
      ['worker:memory-gib>=32'],
    ],
    ['a plain name is not met by a value', ['worker:memory-gib'], ['worker:memory-gib=64'], ['worker:memory-gib']],
    ['a valued string is met by the identical string', ['x=4'], ['x=4'], []],
    ['a valued string is not met by another value', ['x=4'], ['x=5'], ['x=4']],
    ['the largest value counts', ['x>=10'], ['x=2', 'x=12', 'x=5'], []],
    ['provided minimums carry no value', ['x>=1'], ['x>=64'], ['x>=1']],
    ['every minimum must hold', ['x>=1', 'x>=100'], ['x=50'], ['x>=100']],
    ['results keep the order of required', ['c', 'a', 'b'], [], ['c', 'a', 'b']],
    ['results are de-duplicated', ['a', 'b', 'a'], [], ['a', 'b']],
  ])('%s', (_label, required, provided, expected) => {
    expect(missingTags(required, provided)).toEqual(expected);
  });
});

describe('matchTags', () => {
  const sbuild = {
    provided: ['task:scope:debian', 'task:workspace:debian:developers', 'task:source-package:hello'],
    required: ['worker:type:worker', 'worker:cap:sbuild', 'worker:build-arch:amd64', 'worker:memory-gib>=8'],
  };
  const amd64 = {
    provided: ['worker:type:worker', 'worker:cap:sbuild', 'worker:build-arch:amd64', 'worker:memory-gib=16'],
    required: [],
  };

  it.each<
    [string, { provided: string[]; required: string[] }, { provided: string[]; required: string[] }, string[], string[]]
  >([
    ['empty sets match', { provided: [], required: [] }, { provided: [], required: [] }, [], []],
    ['a fitting worker', sbuild, amd64, [], []],
    [
      'a worker short of memory and of the architecture',
      sbuild,
      {
        ...amd64,
        provided: ['worker:type:worker', 'worker:cap:sbuild', 'worker:build-arch:i386', 'worker:memory-gib=4'],
      },
      ['worker:build-arch:amd64', 'worker:memory-gib>=8'],
      [],
    ],
    [
      'an exclusive worker refuses a task from another workspace',
      sbuild,
      { ...amd64, required: ['task:workspace:debian:security'] },
      [],
      ['task:workspace:debian:security'],
    ],
    [
      'an exclusive worker takes a task from its workspace',
      { ...sbuild, provided: [...sbuild.provided, 'task:workspace:debian:security'] },
      { ...amd64, required: ['task:workspace:debian:security'] },
      [],
      [],
    ],
    [
      'both sides can miss at once',
      { provided: [], required: ['worker:cap:kvm'] },
      { provided: [], required: ['site:gpu'] },
      ['worker:cap:kvm'],
      ['site:gpu'],
    ],
  ])('%s', (_label, task, worker, missingOnWorker, missingOnTask) => {
    expect(matchTags(task, worker)).toEqual({
      ok: missingOnWorker.length === 0 && missingOnTask.length === 0,
      missingOnWorker,
      missingOnTask,
    });
  });
});

describe('match properties', () => {
  const name = fc.constantFrom('a', 'b', 'worker:cap:x', 'worker:memory-gib', 'A');
  const value = fc.integer({ min: 0, max: 20 }).map(String);
  const providedTag = fc.oneof(
    name,
    fc.tuple(name, value).map(([n, v]) => `${n}=${v}`),
  );
  const requiredTag = fc.oneof(
    name,
    fc.tuple(name, value).map(([n, v]) => `${n}>=${v}`),
  );
  const side = fc.record({
    provided: fc.array(providedTag, { maxLength: 6 }),
    required: fc.array(requiredTag, { maxLength: 6 }),
  });
  const runs = { numRuns: 300 };

  it('is symmetric: swapping task and worker swaps the missing lists', () => {
    fc.assert(
      fc.property(side, side, (task, worker) => {
        const forward = matchTags(task, worker);
        const backward = matchTags(worker, task);
        expect(backward).toEqual({
          ok: forward.ok,
          missingOnWorker: forward.missingOnTask,
          missingOnTask: forward.missingOnWorker,
        });
      }),
      runs,
    );
  });

  it('only names required tags, and ok means nothing is missing', () => {
    fc.assert(
      fc.property(side, side, (task, worker) => {
        const result = matchTags(task, worker);
        expect(result.missingOnWorker.every((t) => task.required.includes(t))).toBe(true);
        expect(result.missingOnTask.every((t) => worker.required.includes(t))).toBe(true);
        expect(result.ok).toBe(result.missingOnWorker.length === 0 && result.missingOnTask.length === 0);
      }),
      runs,
    );
  });

  it('is monotone: providing more never adds a missing tag', () => {
    fc.assert(
      fc.property(fc.array(requiredTag), fc.array(providedTag), fc.array(providedTag), (required, provided, extra) => {
        const before = missingTags(required, provided);
        const after = missingTags(required, [...provided, ...extra]);
        expect(after.every((t) => before.includes(t))).toBe(true);
      }),
      runs,
    );
  });

  it('plain tags match exactly when they are among the provided ones', () => {
    fc.assert(
      fc.property(fc.array(name), fc.array(name), (required, provided) => {
        const expected = [...new Set(required.filter((t) => !provided.includes(t)))];
        expect(missingTags(required, provided)).toEqual(expected);
      }),
      runs,
    );
  });
});
