import { describe, expect, it } from 'vitest';
import { TASKS, findTask } from '../../src/tasks/registry.js';
import { TASK_TYPES } from '../../src/tasks/types.js';

describe('task registry', () => {
  it('identifies each task by its type and name once', () => {
    const keys = TASKS.map((t) => `${t.type}/${t.name}`);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it.each([
    ['worker', 'sbuild', 'worker'],
    ['workflow', 'sbuild', 'workflow'],
    ['signing', 'sign', 'signing'],
    ['internal', 'synchronization_point', 'internal'],
  ])('finds %s/%s', (type, name, expectedType) => {
    expect(findTask(type, name)?.type).toBe(expectedType);
    expect(findTask(type, name)?.name).toBe(name);
  });

  it.each([
    ['worker', 'nosuchtask'],
    ['server', 'sbuild'],
    ['nosuchtype', 'noop'],
  ])('finds nothing for %s/%s', (type, name) => {
    expect(findTask(type, name)).toBeUndefined();
  });

  it.each(TASKS.map((t) => [`${t.type}/${t.name}`, t] as const))('%s is well formed', (_key, task) => {
    expect(TASK_TYPES).toContain(task.type);
    expect(task.name).toMatch(/^[a-z0-9_]+$/);
    expect(Number.isInteger(task.version) && task.version > 0).toBe(true);
    expect(task.description.length).toBeGreaterThan(0);
  });
});
