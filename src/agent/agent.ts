/**
 * The agent's loop: take assignments from the subscription (each id once), acknowledge, run
 * the handler and report its result (again and again until the server has it), release what it
 * cannot run, heartbeat and report metadata, and drain on a signal.
 */
import fs from 'node:fs';
import path from 'node:path';
import { retry, StoppedError, Waker } from './backoff.js';
import { AuthError, TransientError, type AssignmentStream, type AssignmentStreamOptions } from './client.js';
import type { AgentConfig } from './config.js';
import { metadataInput, type Facts } from './facts.js';
import { MESSAGES, type Logger } from './log.js';
import { NUL_REPLACEMENT } from '../shared/log-text.js';
import { startShipper } from './log-shipper.js';
import type { InterruptionNotice } from './interruption.js';
import type { Answer, Api, Assignment, RunReport, TypedError } from './operations.js';
import { runStatisticsErrors, type RunStatistics } from '../shared/run-statistics.js';
import type { RunUsage } from './measure.js';
import { suggestedParallelism } from './parallelism.js';
import { runLimits } from './run-limits.js';
import { REASON_FILE, resultOf, type Outcome, type Run, type RunSpec, type TaskResult } from './runner.js';

/** The process exit codes of tagsched-worker. */
export const EXIT_CODES = { drained: 0, failure: 1, tokenRefused: 2, interrupted: 3, usage: 64 } as const;

/** How long an agent that stops without draining waits for its stopped runs to end (and their cgroups to go). */
const RUNS_END_MS = 10_000;

/** Why the agent hands an assignment back to the queue. */
export const RELEASE_REASONS = {
  shuttingDown: 'the worker is shutting down',
  noHandler: (taskName: string) => `no handler for task ${taskName} on this worker`,
} as const;

/** Everything the loop talks to; main.ts gives the real ones, tests fakes. */
export interface AgentDeps {
  config: AgentConfig;
  log: Logger;
  api: Api;
  openStream(handlers: Pick<AssignmentStreamOptions, 'onConnected' | 'onAssignment' | 'onFatal'>): AssignmentStream;
  detectFacts(): Promise<Facts>;
  startRun(spec: RunSpec): Run;
  /** os.availableParallelism() and os.loadavg()[0], sampled when a handler starts. */
  load(): { cpuCount: number; load1: number };
  /** What handlers inherit (runner.ts removes the tokens). */
  env: NodeJS.ProcessEnv;
  /** Known from the state file; otherwise learnt from the first metadata report. */
  workerName: string | null;
  /** One look for the provider's notice that it takes this machine away (interruption.ts); absent: none is watched for. */
  interruptionNotice?: () => Promise<InterruptionNotice | null>;
}

/** A running agent. */
export interface Agent {
  /** Runs until drained (EXIT_CODES.drained) or the token is refused (EXIT_CODES.tokenRefused). */
  run(): Promise<number>;
  /** SIGTERM / SIGINT: no new work, finish what runs, report, then run() resolves. */
  drain(signal: string): void;
}

/**
 * Where an assignment is. A re-sent id that is still being handled is ignored; a finished one is taken
 * again, because the server only sends what is ASSIGNED to us now: the same id again means the
 * request was re-queued and given back to us (a stale copy is refused by startWorkRequest, harmlessly).
 */
type Phase = 'starting' | 'running' | 'reporting' | 'done';

/** Ids remembered for de-duplication; the oldest finished ones are forgotten past this. */
const MAX_REMEMBERED = 10_000;

const errorFields = (e: TypedError) => ({ type: e.type, code: e.code, message: e.message });
const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

function outcomeFields(o: Outcome): Record<string, unknown> {
  if (o.kind === 'exit') return { exitCode: o.code };
  if (o.kind === 'signal') return { signal: o.signal };
  return { error: o.error };
}

/** The most of a handler's reason file that is read (the server keeps 1000 characters). */
const MAX_REASON_BYTES = 4096;

/** What the result is reported with: the exit code, and a reason when the agent knows one. */
function reportOf(outcome: Outcome, runDir: string): RunReport {
  if (outcome.kind === 'signal') return { exitCode: null, reason: `the handler was killed by ${outcome.signal}` };
  if (outcome.kind === 'not-started')
    return { exitCode: null, reason: `the handler could not be started: ${outcome.error}` };
  if (outcome.code === 0) return { exitCode: 0, reason: null };
  let reason: string | null = null;
  try {
    // The handler owns its directory: the reason file is read only if it is a regular file of its own, never through a link.
    const fd = fs.openSync(
      path.join(runDir, REASON_FILE),
      fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK,
    );
    try {
      if (!fs.fstatSync(fd).isFile()) throw new Error('not a regular file');
      const buf = Buffer.alloc(MAX_REASON_BYTES);
      reason =
        buf
          .subarray(0, fs.readSync(fd, buf, 0, MAX_REASON_BYTES, 0))
          .toString('utf8')
          .replaceAll('\u0000', NUL_REPLACEMENT)
          .trim() || null;
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // no reason file: the server takes the last lines of the output
  }
  return { exitCode: outcome.code, reason };
}

/**
 * What a run used, from its instants (Date.now()) and its measurement, as the server takes it; null
 * when a figure is out of the server's bounds (a clock jump): the result must not be refused for it.
 */
export function runStatistics(t: {
  acknowledgedAt: number;
  startedAt: number;
  exitedAt: number;
  readyAt: number;
  cpuCount: number;
  usage: RunUsage | null;
}): RunStatistics | null {
  const seconds = (from: number, to: number) => Math.max(0, to - from) / 1000;
  const statistics: RunStatistics = {
    setupSeconds: seconds(t.acknowledgedAt, t.startedAt),
    runSeconds: seconds(t.startedAt, t.exitedAt),
    teardownSeconds: seconds(t.exitedAt, t.readyAt),
    cpuSeconds: t.usage?.cpuSeconds ?? null,
    peakMemoryBytes: t.usage?.peakMemoryBytes ?? null,
    peakDiskBytes: t.usage?.peakDiskBytes ?? null,
    cpuCount: Math.max(1, t.cpuCount),
    memoryMethod: t.usage?.memoryMethod ?? 'PROCESS_TREE',
    outOfMemory: t.usage?.outOfMemory ?? null,
    diskFull: t.usage?.diskFull ?? null,
    memoryLimitBytes: t.usage?.memoryLimitBytes ?? null,
  };
  return runStatisticsErrors(statistics).length ? null : statistics;
}

/** Builds the agent; nothing happens before run(). */
export function createAgent(deps: AgentDeps): Agent {
  const { config, log, api } = deps;
  const runsDir = path.join(config.workDir, 'runs');
  const phases = new Map<string, Phase>();
  const work = new Set<Promise<void>>();
  const runs = new Set<Run>();
  const stop = new AbortController(); // ends every retry: the run is over
  const waker = new Waker();
  const timers: NodeJS.Timeout[] = [];
  let stream: AssignmentStream | null = null;
  let draining = false;
  let finished = false;
  let serverDraining = false;
  let drainHeartbeat: Promise<void> = Promise.resolve();
  let workerName = deps.workerName;
  let metadataRunning = false;
  let metadataAgain = false;
  let interrupted = false;
  let resolveExit: (code: number) => void = () => {};
  const exited = new Promise<number>((resolve) => (resolveExit = resolve));

  /** The ids the server should consider ours: acknowledged and not yet reported. */
  const held = () => [...phases].filter(([, p]) => p === 'running' || p === 'reporting').map(([id]) => id);

  function setPhase(id: string, phase: Phase) {
    phases.set(id, phase);
    if (phases.size <= MAX_REMEMBERED) return;
    for (const [old, p] of phases) {
      if (phases.size <= MAX_REMEMBERED) break;
      if (p === 'done') phases.delete(old);
    }
  }

  /** Calls the server until it answers: network failures wait and retry; a refused token ends the run. */
  async function persist<T>(
    operation: string,
    fields: Record<string, unknown>,
    fn: () => Promise<Answer<T>>,
  ): Promise<Answer<T>> {
    try {
      return await retry(fn, {
        shouldRetry: (err) => err instanceof TransientError,
        maxBackoffMs: config.maxBackoffMs,
        signal: stop.signal,
        waker,
        onRetry: (err, attempt, delayMs) =>
          log.warn({ operation, ...fields, attempt, delayMs, error: messageOf(err) }, MESSAGES.retrying),
      });
    } catch (err) {
      if (err instanceof AuthError) {
        fail(err);
        throw new StoppedError('token refused');
      }
      throw err;
    }
  }

  async function release(id: string, reason: string) {
    const answer = await persist('releaseWorkRequest', { id }, () => api.releaseWorkRequest(id, reason));
    if (answer.ok) log.info({ id, reason }, MESSAGES.released);
    else log.warn({ id, reason, ...errorFields(answer.error) }, 'release refused');
  }

  async function execute(
    a: Assignment,
    command: string,
    acknowledgedAt: number,
  ): Promise<{ result: TaskResult; report: RunReport }> {
    const { cpuCount, load1 } = deps.load();
    const suggested = suggestedParallelism({ cpuCount, load1, running: runs.size + 1 });
    const limits = runLimits(a.runLimits, suggested, config.handlerMemoryLimitBytes);
    const run = deps.startRun({ task: a, command, runsDir, env: deps.env, ...limits });
    const startedAt = Date.now();
    runs.add(run);
    if (run.pid !== undefined)
      log.info(
        {
          id: a.id,
          taskName: a.taskName,
          pid: run.pid,
          parallel: limits.parallel,
          memoryLimitBytes: limits.memoryLimitBytes,
          reserved: a.runLimits ?? null,
          logFile: run.logFile,
        },
        MESSAGES.started,
      );
    const shipper = startShipper({
      id: a.id,
      file: run.logFile,
      api,
      intervalMs: config.logIntervalMs,
      send: persist,
      onRefused: (error) => log.warn({ id: a.id, ...errorFields(error) }, MESSAGES.outputRefused),
    });
    const outcome = await run.done;
    const exitedAt = Date.now();
    runs.delete(run);
    const result = resultOf(outcome);
    log.info({ id: a.id, result, ...outcomeFields(outcome), durationMs: exitedAt - startedAt }, MESSAGES.finished);
    // The output is all on the server before the result: a reader of a completed request has it all.
    await shipper.finish();
    const report = reportOf(outcome, run.dir);
    const usage = await run.usage;
    const statistics = runStatistics({ acknowledgedAt, startedAt, exitedAt, readyAt: Date.now(), cpuCount, usage });
    if (statistics) log.info({ id: a.id, ...statistics }, MESSAGES.measured);
    return { result, report: { ...report, statistics } };
  }

  async function handle(a: Assignment) {
    const { id } = a;
    try {
      const command = config.handlers.get(a.taskName);
      if (draining || command === undefined) {
        await release(id, draining ? RELEASE_REASONS.shuttingDown : RELEASE_REASONS.noHandler(a.taskName));
        return;
      }
      const ack = await persist('startWorkRequest', { id }, () => api.startWorkRequest(id));
      if (!ack.ok) {
        log.warn({ id, ...errorFields(ack.error) }, MESSAGES.assignmentDropped);
        return;
      }
      const acknowledgedAt = Date.now();
      setPhase(id, 'running');
      const { result, report } = await execute(a, command, acknowledgedAt);
      setPhase(id, 'reporting');
      const done = await persist('completeWorkRequest', { id, result, exitCode: report.exitCode }, () =>
        api.completeWorkRequest(id, result, report),
      );
      if (done.ok) log.info({ id, result }, MESSAGES.resultReported);
      else log.warn({ id, result, ...errorFields(done.error) }, MESSAGES.resultDropped);
    } catch (err) {
      if (!(err instanceof StoppedError)) log.error({ id, err }, 'the assignment could not be handled');
    } finally {
      setPhase(id, 'done');
    }
  }

  function onAssignment(a: Assignment) {
    if (finished) return;
    const phase = phases.get(a.id);
    if (phase !== undefined && phase !== 'done') {
      log.info({ id: a.id, phase }, MESSAGES.duplicateIgnored);
      return;
    }
    setPhase(a.id, 'starting');
    log.info({ id: a.id, taskType: a.taskType, taskName: a.taskName }, MESSAGES.assignmentReceived);
    const p = handle(a).finally(() => {
      work.delete(p);
      finishIfDrained();
    });
    work.add(p);
  }

  async function heartbeat() {
    try {
      const answer = await api.heartbeat({ shuttingDown: draining, running: held() });
      if (!answer.ok) {
        log.warn(errorFields(answer.error), 'heartbeat refused');
        return;
      }
      if (answer.value.draining !== serverDraining) {
        serverDraining = answer.value.draining;
        log.info({ draining: serverDraining }, MESSAGES.serverDraining);
      }
      for (const a of answer.value.assigned) onAssignment(a);
    } catch (err) {
      if (err instanceof AuthError) fail(err);
      else log.warn({ error: messageOf(err) }, 'heartbeat failed');
    }
  }

  /** One report at a time; a request meanwhile (a reconnect) sends fresh facts once more after it. */
  async function reportMetadata() {
    if (metadataRunning) {
      metadataAgain = true;
      return;
    }
    metadataRunning = true;
    try {
      do {
        metadataAgain = false;
        const input = metadataInput(await deps.detectFacts(), config.handlers.keys(), config.providedTags);
        const answer = await persist('reportWorkerMetadata', {}, () => api.reportWorkerMetadata(input));
        if (!answer.ok) {
          log.error(errorFields(answer.error), 'metadata refused');
          continue;
        }
        const { name, status, rejectedTags } = answer.value;
        if (workerName === null) log.setBindings({ worker: name });
        workerName = name;
        const { architectures, cpuCount, executors, tools } = input;
        log.info(
          { status, architectures, cpuCount, executors, tools, tasks: input.tasks.map((t) => t.name) },
          MESSAGES.metadataReported,
        );
        for (const r of rejectedTags) log.warn({ tag: r.tag, code: r.code, reason: r.reason }, MESSAGES.tagRejected);
      } while (metadataAgain && !finished);
    } catch (err) {
      if (!(err instanceof StoppedError)) log.error({ error: messageOf(err) }, 'metadata report failed');
    } finally {
      metadataRunning = false;
    }
  }

  function onConnected() {
    waker.wakeAll(); // results waiting out a backoff go now
    void reportMetadata();
    void heartbeat();
  }

  function finishIfDrained() {
    if (draining && work.size === 0) void finish(EXIT_CODES.drained);
  }

  async function finish(code: number) {
    if (finished) return;
    finished = true;
    stop.abort();
    for (const t of timers) clearInterval(t);
    if (code !== EXIT_CODES.drained) for (const r of runs) r.kill('SIGTERM');
    // Their ends, for at most RUNS_END_MS: a run's end removes its cgroup leaf, and with it what its
    // handler left running outside its process group; the process exits after this.
    await Promise.race([
      Promise.all([...runs].map((r) => r.usage)),
      new Promise((resolve) => setTimeout(resolve, RUNS_END_MS).unref()),
    ]);
    await drainHeartbeat;
    await stream?.close();
    resolveExit(code);
  }

  /**
   * Looks for the provider's notice once. On one: no new work, the server told (it terminates this
   * worker and re-queues its work without counting a retry), then the handlers are stopped (their
   * work runs again elsewhere) and the agent exits EXIT_CODES.interrupted. Telling the server comes
   * first: a handler stopped before would be reported as failed.
   */
  async function lookForInterruption() {
    if (finished || interrupted || !deps.interruptionNotice) return;
    let notice: InterruptionNotice | null;
    try {
      notice = await deps.interruptionNotice();
    } catch (err) {
      log.debug({ error: messageOf(err) }, 'could not read the interruption notice');
      return;
    }
    if (!notice || finished || interrupted) return;
    interrupted = true;
    draining = true;
    log.warn({ action: notice.action, time: notice.time, running: held().length }, MESSAGES.interrupted);
    try {
      const answer = await persist('reportInstanceInterruption', {}, () => api.reportInstanceInterruption(notice));
      if (answer.ok) log.info({ worker: answer.value.name }, 'the server re-queued this worker’s work');
      else log.warn({ ...errorFields(answer.error) }, 'the server refused the interruption notice');
    } catch (err) {
      if (err instanceof StoppedError) return; // the token was refused: fail() ended the run
      throw err;
    }
    await finish(EXIT_CODES.interrupted);
  }

  function fail(err: AuthError) {
    if (finished) return;
    if (interrupted) {
      // The server terminates this worker when told of the interruption and closes its connection,
      // which may arrive before the report's answer: that is the interruption's end, not a bad token.
      log.info({ detail: err.message }, 'the server ended this worker after the interruption');
      void finish(EXIT_CODES.interrupted);
      return;
    }
    log.error(
      {
        detail: err.message,
        hint: 'check --token / TAGSCHED_WORKER_TOKEN, or remove the state file to activate again',
      },
      MESSAGES.tokenRefused,
    );
    void finish(EXIT_CODES.tokenRefused);
  }

  return {
    async run() {
      fs.mkdirSync(runsDir, { recursive: true });
      stream = deps.openStream({ onConnected, onAssignment, onFatal: fail });
      timers.push(setInterval(() => void heartbeat(), config.heartbeatIntervalMs));
      timers.push(setInterval(() => void reportMetadata(), config.metadataIntervalMs));
      if (deps.interruptionNotice)
        timers.push(setInterval(() => void lookForInterruption(), config.interruptionPollMs));
      return exited;
    },
    drain(signal) {
      if (finished) return;
      if (draining) {
        log.warn(
          { signal, running: held().length, hint: 'running work finishes first; SIGKILL stops now' },
          MESSAGES.alreadyDraining,
        );
        return;
      }
      draining = true;
      log.info({ signal, running: held().length, pending: work.size }, MESSAGES.draining);
      drainHeartbeat = heartbeat();
      finishIfDrained();
    },
  };
}
