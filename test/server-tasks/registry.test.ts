import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/log.js';
import { SERVER_TASK_RUNNERS, findServerTaskRunner } from '../../src/loops/server-tasks/registry.js';
import { serverWorkerName } from '../../src/loops/server-tasks/server-workers.js';
import { isServerWorkerOf } from '../../src/services/processes/server-worker-names.js';
import { TASKS } from '../../src/core/tasks/registry.js';

const ctx = { workRequestId: 1, log: createLogger('silent'), signal: new AbortController().signal };

describe('server-task runners', () => {
  it('there is one runner for every server task of the task registry, at its version, and no other', () => {
    const tasks = TASKS.filter((t) => t.type === 'server')
      .map((t) => `${t.name}@${t.version}`)
      .sort();
    expect(SERVER_TASK_RUNNERS.map((r) => `${r.name}@${r.version}`).sort()).toEqual(tasks);
  });

  const servernoop = findServerTaskRunner(SERVER_TASK_RUNNERS, 'servernoop')!;
  it.each([
    [{}, { result: 'SUCCESS' }],
    [{ result: true }, { result: 'SUCCESS' }],
    [{ result: false }, { result: 'FAILURE', reason: 'servernoop was asked to fail (taskData.result is false)' }],
  ])('servernoop with %j ends %j', async (data, outcome) => {
    expect(await servernoop.run(data, ctx)).toEqual(outcome);
  });

  it('checks the stored data with the task schema before running', async () => {
    await expect(servernoop.run({ result: 'yes' }, ctx)).rejects.toThrow();
  });
});

describe('server worker names', () => {
  const long = 'h'.repeat(100);
  it.each([
    ['build.example.org:4000', 1, 1, 'server-build.example.org-4000'],
    ['build.example.org:4000', 2, 3, 'server-build.example.org-4000-2'],
    ['odd host/name', 1, 1, 'server-odd-host-name'],
    ['replica-a', 1, 1, 'server-replica-a'],
  ])('process %s, %i of %i: %s', (processName, index, count, name) => {
    expect(serverWorkerName(processName, index, count)).toBe(name);
  });

  it('a process name too long to fit keeps its beginning and a hash of the whole name, within 100 characters', () => {
    const one = serverWorkerName(`${long}:4000`, 12, 12);
    const other = serverWorkerName(`${long}:4001`, 12, 12);
    for (const name of [one, other]) {
      expect(name).toHaveLength(100);
      expect(name).toMatch(/^server-h+-[0-9a-f]{8}-12$/);
    }
    expect(one).not.toBe(other);
    expect(serverWorkerName(`${long}:4000`, 12, 12)).toBe(one);
  });

  it("tells a process's server workers, whatever their count, from another process's", () => {
    expect(isServerWorkerOf('server-replica-a', 'replica-a')).toBe(true);
    expect(isServerWorkerOf('server-replica-a-3', 'replica-a')).toBe(true);
    expect(isServerWorkerOf(serverWorkerName(`${long}:1`, 2, 2), `${long}:1`)).toBe(true);
    expect(isServerWorkerOf('server-replica-a', 'replica-b')).toBe(false);
    expect(isServerWorkerOf('server-replica-ab', 'replica-a')).toBe(false);
    expect(isServerWorkerOf('server-replica-a-x', 'replica-a')).toBe(false);
    expect(isServerWorkerOf(serverWorkerName(`${long}:1`, 2, 2), `${long}:2`)).toBe(false);
  });
});
