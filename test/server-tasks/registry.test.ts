import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/log.js';
import { SERVER_TASK_RUNNERS, findServerTaskRunner } from '../../src/loops/server-tasks/registry.js';
import { serverWorkerName } from '../../src/loops/server-tasks/server-workers.js';
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
  it.each([
    ['build.example.org', 4000, 1, 1, 'server-build.example.org-4000'],
    ['build.example.org', 4000, 2, 3, 'server-build.example.org-4000-2'],
    ['odd host/name', 4001, 1, 1, 'server-odd-host-name-4001'],
    ['h'.repeat(200), 4000, 12, 12, `server-${'h'.repeat(100 - 'server-'.length - '-4000-12'.length)}-4000-12`],
  ])('%s, port %i, %i of %i: %s', (host, port, index, count, name) => {
    const got = serverWorkerName(host, port, index, count);
    expect(got).toBe(name);
    expect(got.length).toBeLessThanOrEqual(100);
  });
});
