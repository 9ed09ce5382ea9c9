import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createAgent, EXIT_CODES, RELEASE_REASONS, type AgentDeps } from '../../src/agent/agent.js';
import { AuthError, TransientError, type AssignmentStreamOptions } from '../../src/agent/client.js';
import { parseConfig } from '../../src/agent/config.js';
import type { Facts } from '../../src/agent/facts.js';
import { MESSAGES } from '../../src/agent/log.js';
import type { Answer, Api, Assignment } from '../../src/agent/operations.js';
import type { Outcome, Run, RunSpec } from '../../src/agent/runner.js';

const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tagsched-agent-'));
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));

const facts: Facts = {
  architectures: ['amd64'],
  cpuCount: 4,
  totalPhysicalMemory: 8e9,
  diskFree: 5e10,
  executors: ['unshare'],
  tools: [],
};
const ok = <T>(value: T): Answer<T> => ({ ok: true, value });
const notFound: Answer<never> = {
  ok: false,
  error: { type: 'NotFoundError', code: 'NOT_FOUND', message: 'not assigned to this worker' },
};
const task = (id: string, taskName = 'noop'): Assignment => ({ id, taskType: 'worker', taskName, taskData: { id } });

/** A handler run the test ends by hand. */
class FakeRun implements Run {
  readonly pid = 4242;
  readonly dir: string;
  readonly logFile: string;
  readonly done: Promise<Outcome>;
  readonly usage = Promise.resolve(null);
  readonly killedWith: string[] = [];
  end: (outcome: Outcome) => void = () => {};
  constructor(readonly spec: RunSpec) {
    this.dir = path.join(spec.runsDir, spec.task.id);
    this.logFile = path.join(this.dir, 'log');
    this.done = new Promise((resolve) => (this.end = resolve));
  }
  kill(signal: NodeJS.Signals) {
    this.killedWith.push(signal);
    this.end({ kind: 'signal', signal });
  }
}

type Call = { op: keyof Api; args: unknown[] };

/** Agents of the current test, drained after it so that none keeps its timers. */
const started: { drain(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((a) => a.drain()));
});

/** An agent wired to fakes: an API that records calls, a stream the test drives, runs it ends. */
function harness(
  options: { handlers?: string[]; api?: Partial<Api>; interruptionNotice?: AgentDeps['interruptionNotice'] } = {},
) {
  const lines: Record<string, unknown>[] = [];
  const log = pino(
    { level: 'debug' },
    { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  const calls: Call[] = [];
  const record = <K extends keyof Api>(op: K, fallback: Api[K]): Api[K] =>
    ((...args: unknown[]) => {
      calls.push({ op, args });
      return ((options.api?.[op] ?? fallback) as (...a: unknown[]) => unknown)(...args);
    }) as Api[K];
  const api: Api = {
    activateWorker: record('activateWorker', async () => ok({ token: 't', workerName: 'w' })),
    reportWorkerMetadata: record('reportWorkerMetadata', async () =>
      ok({ name: 'w1', status: 'IDLE', rejectedTags: [] }),
    ),
    heartbeat: record('heartbeat', async () => ok({ draining: false, assigned: [] })),
    startWorkRequest: record('startWorkRequest', async (id: string) => ok({ id, status: 'RUNNING' })),
    completeWorkRequest: record('completeWorkRequest', async (id: string) => ok({ id, status: 'COMPLETED' })),
    releaseWorkRequest: record('releaseWorkRequest', async (id: string) => ok({ id, status: 'PENDING' })),
    appendWorkRequestLog: record('appendWorkRequestLog', async (chunk) =>
      ok({ nextOffset: chunk.offset + chunk.bytes, accepted: true }),
    ),
    rotateToken: record('rotateToken', async () => ok({ token: 't2', workerName: 'w' })),
    reportInstanceInterruption: record('reportInstanceInterruption', async () => ok({ name: 'w', status: 'INACTIVE' })),
  };
  let stream: Pick<AssignmentStreamOptions, 'onConnected' | 'onAssignment' | 'onFatal'> | null = null;
  let streamClosed = false;
  const runs: FakeRun[] = [];
  const handlerFlags = (options.handlers ?? ['noop=true']).flatMap((h) => ['--handler', h]);
  const config = parseConfig(
    [
      '--work-dir',
      workDir,
      '--heartbeat-interval',
      '3600',
      '--metadata-interval',
      '3600',
      '--max-backoff',
      '0.02',
      '--interruption-poll',
      '0.01',
      '--provided-tag',
      'worker:cap:kvm',
      ...handlerFlags,
    ],
    {},
  );
  const deps: AgentDeps = {
    config,
    log,
    api,
    openStream(handlers) {
      stream = handlers;
      return { close: async () => void (streamClosed = true) };
    },
    detectFacts: async () => facts,
    startRun(spec) {
      const run = new FakeRun(spec);
      runs.push(run);
      return run;
    },
    load: () => ({ cpuCount: 8, load1: 2 }),
    env: { PATH: '/usr/bin' },
    workerName: null,
    interruptionNotice: options.interruptionNotice,
  };
  const agent = createAgent(deps);
  const exit = agent.run();
  started.push({
    drain() {
      agent.drain('SIGTERM');
      for (const r of runs) r.end({ kind: 'exit', code: 0 });
      return exit;
    },
  });
  let exitCode: number | null = null;
  void exit.then((code) => (exitCode = code));
  return {
    agent,
    exit,
    exitCode: () => exitCode,
    lines,
    calls,
    runs,
    streamClosed: () => streamClosed,
    push: (a: Assignment) => stream!.onAssignment(a),
    connect: (reconnect = false) => stream!.onConnected(reconnect),
    refuseToken: () => stream!.onFatal(new AuthError('WebSocket closed with 4401')),
    callsOf: (op: keyof Api) => calls.filter((c) => c.op === op).map((c) => c.args),
    messages: () => lines.map((l) => l.msg),
    logged: (msg: string) => lines.filter((l) => l.msg === msg),
  };
}

/** The statistics of a fake run: the phases timed by the agent, nothing measured (a FakeRun has no usage). */
const timedOnly = expect.objectContaining({
  setupSeconds: expect.any(Number),
  runSeconds: expect.any(Number),
  teardownSeconds: expect.any(Number),
  cpuSeconds: null,
  peakMemoryBytes: null,
  peakDiskBytes: null,
  cpuCount: 8,
  memoryMethod: 'PROCESS_TREE',
});

const eventually = (assertion: () => void) => vi.waitFor(assertion, { timeout: 2000, interval: 5 });

describe('the agent', () => {
  it('acknowledges, runs and reports an assignment, logging each step', async () => {
    const h = harness({ handlers: ['noop=run-noop --fast'] });
    h.push(task('1'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    const [run] = h.runs;
    expect(run.spec).toMatchObject({
      command: 'run-noop --fast',
      runsDir: path.join(workDir, 'runs'),
      parallel: 6,
      env: { PATH: '/usr/bin' },
    });
    expect(run.spec.task).toEqual(task('1'));
    expect(h.callsOf('startWorkRequest')).toEqual([['1']]);
    run.end({ kind: 'exit', code: 1 });
    await eventually(() =>
      expect(h.callsOf('completeWorkRequest')).toEqual([
        ['1', 'FAILURE', { exitCode: 1, reason: null, statistics: timedOnly }],
      ]),
    );
    await eventually(() => expect(h.messages()).toContain(MESSAGES.resultReported));
    expect(
      h
        .messages()
        .filter((m) =>
          [MESSAGES.assignmentReceived, MESSAGES.started, MESSAGES.finished, MESSAGES.resultReported].includes(
            m as never,
          ),
        ),
    ).toEqual([MESSAGES.assignmentReceived, MESSAGES.started, MESSAGES.finished, MESSAGES.resultReported]);
    expect(h.logged(MESSAGES.finished)[0]).toMatchObject({ id: '1', result: 'FAILURE', exitCode: 1 });
  });

  it('reports why a run failed: a signal, a handler that did not start, or what the handler wrote to its reason file', async () => {
    const h = harness();
    h.push(task('20'));
    h.push(task('21'));
    h.push(task('22'));
    await eventually(() => expect(h.runs).toHaveLength(3));
    const [killed, notStarted, failed] = h.runs;
    expect(failed.spec.env.TAGSCHED_REASON_FILE).toBeUndefined(); // the runner sets it, not the agent
    fs.mkdirSync(failed.dir, { recursive: true });
    fs.writeFileSync(path.join(failed.dir, 'reason'), '  the test suite failed: 3 of 40 tests\n');
    killed.end({ kind: 'signal', signal: 'SIGKILL' });
    notStarted.end({ kind: 'not-started', error: 'ENOENT' });
    failed.end({ kind: 'exit', code: 2 });
    await eventually(() => expect(h.callsOf('completeWorkRequest')).toHaveLength(3));
    expect(
      Object.fromEntries(h.callsOf('completeWorkRequest').map(([id, result, report]) => [id, [result, report]])),
    ).toEqual({
      '20': ['ERROR', { exitCode: null, reason: 'the handler was killed by SIGKILL', statistics: timedOnly }],
      '21': ['ERROR', { exitCode: null, reason: 'the handler could not be started: ENOENT', statistics: timedOnly }],
      '22': ['ERROR', { exitCode: 2, reason: 'the test suite failed: 3 of 40 tests', statistics: timedOnly }],
    });
  });

  it('ignores an id it is still handling, and takes a finished one again (it was re-queued and given back)', async () => {
    const h = harness();
    h.push(task('1'));
    h.push(task('1'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    h.push(task('1'));
    h.runs[0].end({ kind: 'exit', code: 0 });
    await eventually(() => expect(h.callsOf('completeWorkRequest')).toHaveLength(1));
    expect(h.logged(MESSAGES.duplicateIgnored)).toHaveLength(2);
    h.push(task('1'));
    await eventually(() => expect(h.callsOf('startWorkRequest')).toHaveLength(2));
    await eventually(() => expect(h.runs).toHaveLength(2));
  });

  it('releases a task it has no handler for, without acknowledging it', async () => {
    const h = harness({ handlers: ['noop=true'] });
    h.push(task('2', 'sbuild'));
    await eventually(() =>
      expect(h.callsOf('releaseWorkRequest')).toEqual([['2', RELEASE_REASONS.noHandler('sbuild')]]),
    );
    expect(h.callsOf('startWorkRequest')).toEqual([]);
    await eventually(() =>
      expect(h.logged(MESSAGES.released)[0]).toMatchObject({
        id: '2',
        reason: 'no handler for task sbuild on this worker',
      }),
    );
  });

  it('keeps a result until the server takes it, and sends it at once when the connection is back', async () => {
    let down = true;
    const h = harness({
      api: {
        completeWorkRequest: async (id) => {
          if (down) throw new TransientError('ECONNREFUSED');
          return ok({ id, status: 'COMPLETED' });
        },
      },
    });
    h.push(task('3'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    h.runs[0].end({ kind: 'exit', code: 0 });
    await eventually(() => expect(h.callsOf('completeWorkRequest').length).toBeGreaterThanOrEqual(3));
    expect(h.logged(MESSAGES.retrying)[0]).toMatchObject({
      operation: 'completeWorkRequest',
      id: '3',
      result: 'SUCCESS',
      error: 'ECONNREFUSED',
    });
    down = false;
    h.connect(true);
    await eventually(() => expect(h.logged(MESSAGES.resultReported)).toHaveLength(1));
    expect(h.callsOf('completeWorkRequest').every(([id, result]) => id === '3' && result === 'SUCCESS')).toBe(true);
  });

  it('drops a result the server refuses with a typed error (the request is no longer ours)', async () => {
    const h = harness({ api: { completeWorkRequest: async () => notFound } });
    h.push(task('4'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    h.runs[0].end({ kind: 'exit', code: 0 });
    await eventually(() => expect(h.logged(MESSAGES.resultDropped)[0]).toMatchObject({ id: '4', code: 'NOT_FOUND' }));
    expect(h.callsOf('completeWorkRequest')).toHaveLength(1);
  });

  it('does not run an assignment whose acknowledgement is refused', async () => {
    const h = harness({ api: { startWorkRequest: async () => notFound } });
    h.push(task('5'));
    await eventually(() =>
      expect(h.logged(MESSAGES.assignmentDropped)[0]).toMatchObject({ id: '5', code: 'NOT_FOUND' }),
    );
    expect(h.runs).toHaveLength(0);
  });

  it('shares the CPUs among the handlers running at once', async () => {
    const h = harness();
    h.push(task('6'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    h.push(task('7'));
    await eventually(() => expect(h.runs).toHaveLength(2));
    expect(h.runs.map((r) => r.spec.parallel)).toEqual([6, 3]); // (8 cpus − load 2) / 1, then / 2
  });

  it('reports metadata and a heartbeat on every connection, and logs the tags the server rejected', async () => {
    const h = harness({
      handlers: ['sbuild=x', 'debsign=y'],
      api: {
        reportWorkerMetadata: async () =>
          ok({
            name: 'arm-1',
            status: 'IDLE',
            rejectedTags: [
              { tag: 'worker:class:trusted', code: 'PROVENANCE_NOT_ALLOWED_FOR_ONTOLOGY', reason: 'admin only' },
            ],
          }),
      },
    });
    h.connect();
    await eventually(() => expect(h.messages()).toContain(MESSAGES.metadataReported));
    expect(h.callsOf('reportWorkerMetadata')[0][0]).toMatchObject({
      architectures: ['amd64'],
      providedTags: ['worker:cap:kvm'],
      tasks: [
        { type: 'signing', name: 'debsign', version: 1 },
        { type: 'worker', name: 'sbuild', version: 1 },
      ],
    });
    expect(h.logged(MESSAGES.tagRejected)[0]).toMatchObject({
      level: 40,
      tag: 'worker:class:trusted',
      reason: 'admin only',
      worker: 'arm-1',
    });
    expect(h.callsOf('heartbeat')[0]).toEqual([{ shuttingDown: false, running: [] }]);
    h.connect(true);
    await eventually(() => expect(h.callsOf('reportWorkerMetadata')).toHaveLength(2));
  });

  it('runs what a heartbeat says is assigned and the subscription missed', async () => {
    const h = harness({ api: { heartbeat: async () => ok({ draining: false, assigned: [task('8')] }) } });
    h.connect();
    await eventually(() => expect(h.runs.map((r) => r.spec.task.id)).toEqual(['8']));
  });

  it('drains: tells the server, releases new work, finishes and reports what runs, then exits 0', async () => {
    const h = harness();
    h.push(task('10'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    h.agent.drain('SIGTERM');
    await eventually(() => expect(h.callsOf('heartbeat')).toContainEqual([{ shuttingDown: true, running: ['10'] }]));
    h.push(task('11'));
    await eventually(() => expect(h.callsOf('releaseWorkRequest')).toEqual([['11', RELEASE_REASONS.shuttingDown]]));
    h.agent.drain('SIGTERM');
    expect(h.logged(MESSAGES.alreadyDraining)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 20));
    expect(h.exitCode()).toBeNull();
    h.runs[0].end({ kind: 'exit', code: 0 });
    expect(await h.exit).toBe(EXIT_CODES.drained);
    expect(h.callsOf('completeWorkRequest')).toEqual([
      ['10', 'SUCCESS', { exitCode: 0, reason: null, statistics: timedOnly }],
    ]);
    expect(h.runs[0].killedWith).toEqual([]);
    expect(h.streamClosed()).toBe(true);
  });

  it('exits at once when drained idle', async () => {
    const h = harness();
    h.agent.drain('SIGINT');
    expect(await h.exit).toBe(EXIT_CODES.drained);
    expect(h.logged(MESSAGES.draining)[0]).toMatchObject({ signal: 'SIGINT', running: 0 });
  });

  it('stops with exit code 2 when the WebSocket refuses the token, killing what runs', async () => {
    const h = harness();
    h.push(task('12'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    h.refuseToken();
    expect(await h.exit).toBe(EXIT_CODES.tokenRefused);
    expect(h.runs[0].killedWith).toEqual(['SIGTERM']);
    expect(h.messages()).toContain(MESSAGES.tokenRefused);
  });

  it('on an interruption notice, tells the server, then stops its handlers and exits 3', async () => {
    let notice: { action: string; time: string } | null = null;
    const h = harness({ interruptionNotice: async () => notice });
    h.push(task('14'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    notice = { action: 'terminate', time: '2026-11-28T08:02:00.000Z' };
    expect(await h.exit).toBe(EXIT_CODES.interrupted);
    expect(h.callsOf('reportInstanceInterruption')).toEqual([[notice]]);
    expect(h.runs[0].killedWith).toEqual(['SIGTERM']);
    expect(h.callsOf('completeWorkRequest')).toEqual([]); // the server re-queued it; a killed run is not a failure
    expect(h.logged(MESSAGES.interrupted)).toHaveLength(1);
  });

  it('exits 3, not 2, when the server closes its connection for the interruption before answering the report', async () => {
    let notice: { action: string; time: string } | null = null;
    let answer: (a: Answer<{ name: string; status: string }>) => void = () => {};
    const h = harness({
      interruptionNotice: async () => notice,
      api: { reportInstanceInterruption: () => new Promise((resolve) => (answer = resolve)) },
    });
    h.push(task('15'));
    await eventually(() => expect(h.runs).toHaveLength(1));
    notice = { action: 'stop', time: '2026-11-28T08:02:00.000Z' };
    await eventually(() => expect(h.callsOf('reportInstanceInterruption')).toHaveLength(1));
    h.refuseToken(); // the server terminated the worker and closed its socket (4401) first
    answer(ok({ name: 'w', status: 'INACTIVE' }));
    expect(await h.exit).toBe(EXIT_CODES.interrupted);
    expect(h.messages()).not.toContain(MESSAGES.tokenRefused);
    expect(h.messages()).toContain('the server ended this worker after the interruption');
  });

  it('stops with exit code 2 when a mutation is refused for the token', async () => {
    const h = harness({
      api: {
        startWorkRequest: async () => {
          throw new AuthError('the bearer token is not valid');
        },
      },
    });
    h.push(task('13'));
    expect(await h.exit).toBe(EXIT_CODES.tokenRefused);
    expect(h.runs).toHaveLength(0);
  });
});
