/**
 * tagsched-worker's entry: read the options, find or activate the worker token, run the agent
 * until it drains or its token is refused, and exit with a code that says which (EXIT_CODES).
 */
import fs from 'node:fs';
import os from 'node:os';
import { CommanderError } from 'commander';
import { ec2SpotNotice } from './interruption.js';
import packageJson from '../../package.json' with { type: 'json' };
import { createAgent, EXIT_CODES, type Agent } from './agent.js';
import { retry, StoppedError } from './backoff.js';
import {
  AuthError,
  createHttpRequest,
  openAssignmentStream,
  preferConnection,
  TransientError,
  type AssignmentStream,
} from './client.js';
import { parseConfig, UsageError, type AgentConfig } from './config.js';
import { detectFacts, systemProbe } from './facts.js';
import { createLogger, MESSAGES, type Logger } from './log.js';
import { createApi, OVER_CONNECTION } from './operations.js';
import { startedByNpm, watchParent } from './parent-watch.js';
import { describeMemoryCgroup, planMemoryCgroup, type MemoryCgroup } from './cgroup.js';
import { describeIsolation, IsolationError, planIsolation, type Isolation } from './isolation.js';
import { startRun } from './runner.js';
import { measureSpeed, type HostSpeed } from './speed.js';
import { advise } from './advise-main.js';
import { chooseCredential, readState, StateFileError, writeState, type AgentState } from './state.js';

// Imported rather than read at run time, so that the bundled agent (dist/tagsched-worker.mjs) carries it.
const { version } = packageJson;

/** The server refused to activate this instance (the activation token is used, expired or unknown). */
class ActivationRefusedError extends Error {
  override readonly name = 'ActivationRefusedError';
}

/** Trades the activation token for a worker token (once), and keeps it in the state file. */
async function activate(
  config: AgentConfig,
  log: Logger,
  activationToken: string,
  signal: AbortSignal,
): Promise<AgentState> {
  const api = createApi(
    createHttpRequest({ url: config.serverUrl, token: activationToken, timeoutMs: config.requestTimeoutMs }),
  );
  const answer = await retry(() => api.activateWorker(config.name), {
    shouldRetry: (err) => err instanceof TransientError,
    maxBackoffMs: config.maxBackoffMs,
    signal,
    onRetry: (err, attempt, delayMs) =>
      log.warn({ operation: 'activateWorker', attempt, delayMs, error: (err as Error).message }, MESSAGES.retrying),
  });
  if (!answer.ok) throw new ActivationRefusedError(`${answer.error.code}: ${answer.error.message}`);
  const state: AgentState = {
    workerToken: answer.value.token,
    workerName: answer.value.workerName,
    server: config.serverUrl,
  };
  writeState(config.stateFile, state);
  log.info({ worker: state.workerName, stateFile: config.stateFile }, MESSAGES.activated);
  return state;
}

/**
 * `--rotate-token`: trades the worker token for a new one (the server revokes the old one at once)
 * and keeps the new one in the state file, which the next start reads. Returns the exit code.
 */
async function rotate(
  config: AgentConfig,
  log: Logger,
  token: string,
  source: 'option' | 'state-file',
  signal: AbortSignal,
): Promise<number> {
  const api = createApi(createHttpRequest({ url: config.serverUrl, token, timeoutMs: config.requestTimeoutMs }));
  // Retried only while the server refuses the connection: after a lost answer the first rotation may
  // have revoked the token already, and a second one would be refused.
  let answer: Awaited<ReturnType<typeof api.rotateToken>>;
  try {
    answer = await retry(() => api.rotateToken(), {
      shouldRetry: (err) => err instanceof TransientError && err.message === 'ECONNREFUSED',
      maxBackoffMs: config.maxBackoffMs,
      signal,
      onRetry: (err, attempt, delayMs) =>
        log.warn({ operation: 'rotateToken', attempt, delayMs, error: (err as Error).message }, MESSAGES.retrying),
    });
  } catch (err) {
    if (err instanceof AuthError) {
      log.error(
        { detail: err.message, hint: 'an admin can issue a new one: tagsched-admin worker rotate-token' },
        MESSAGES.tokenRefused,
      );
      return EXIT_CODES.tokenRefused;
    }
    if (err instanceof TransientError) {
      log.error(
        {
          detail: err.message,
          hint: 'if the server rotated it before the answer was lost, the old token is refused now',
        },
        'the token was not rotated',
      );
      return EXIT_CODES.failure;
    }
    throw err;
  }
  if (!answer.ok) {
    log.error({ code: answer.error.code, detail: answer.error.message }, 'the server refused to rotate the token');
    return EXIT_CODES.tokenRefused;
  }
  writeState(config.stateFile, {
    workerToken: answer.value.token,
    workerName: answer.value.workerName,
    server: config.serverUrl,
  });
  log.info({ worker: answer.value.workerName, stateFile: config.stateFile }, MESSAGES.tokenRotated);
  if (source === 'option') {
    log.warn(
      { stateFile: config.stateFile },
      'the token given by --token (TAGSCHED_WORKER_TOKEN) is revoked: remove it, so that the next start reads the state file',
    );
  }
  return EXIT_CODES.drained;
}

/** Runs the agent and returns the process exit code. */
async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  // `tagsched-worker advise …`: the configuration advisor, a program of its own (advise-main.ts).
  if (argv[0] === 'advise')
    return advise(argv.slice(1), env, {
      input: process.stdin,
      output: process.stdout,
      error: process.stderr,
      argv1: process.argv[1],
    });
  let config: AgentConfig;
  try {
    config = parseConfig(argv, env, { version });
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_CODES.usage; // commander has printed why
    if (err instanceof UsageError) {
      process.stderr.write(`tagsched-worker: ${err.message}\n(run with --help for the options)\n`);
      return EXIT_CODES.usage;
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  const exit = (code: number) => {
    log.info({ code }, MESSAGES.exited);
    return code;
  };
  process.on('unhandledRejection', (err) => {
    log.fatal({ err }, 'unexpected error');
    process.exit(EXIT_CODES.failure);
  });

  // Signals are caught from the start: an activation waiting for the server stops cleanly.
  const stopping = new AbortController();
  let agent: Agent | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    if (agent) return agent.drain(signal);
    log.info({ signal, running: 0 }, MESSAGES.draining);
    stopping.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Under npx the signal stops at npm's `sh -c` (parent-watch.ts): that shell's end stands for it.
  if (startedByNpm(env))
    watchParent((formerParent) => {
      log.info({ formerParent }, MESSAGES.parentGone);
      onSignal('SIGTERM');
    });

  log.info(
    {
      version,
      server: config.serverUrl,
      workDir: config.workDir,
      handlers: [...config.handlers.keys()],
      providedTags: config.providedTags,
    },
    MESSAGES.starting,
  );
  if (config.handlers.size === 0) log.warn('no --handler given: this worker offers no task and will get no work');

  try {
    fs.mkdirSync(config.workDir, { recursive: true });
    let isolation: Isolation | null = null;
    let memoryCgroup: MemoryCgroup | null = null;
    if (!config.rotateToken) {
      isolation = planIsolation({
        choice: config.handlerIsolation,
        handlerUser: config.handlerUser,
        stateFile: config.stateFile,
        hiddenDir: config.hiddenDir,
        uid: process.getuid?.() ?? -1,
        gid: process.getgid?.() ?? -1,
      });
      if (isolation.kind === 'none')
        log.warn(
          { ...describeIsolation(isolation), hint: 'docs/operating/worker-agent.md: handler isolation' },
          MESSAGES.unprotected,
        );
      else log.info(describeIsolation(isolation), MESSAGES.isolated);
      memoryCgroup = planMemoryCgroup(config.memoryCgroup);
      log.info(describeMemoryCgroup(memoryCgroup), MESSAGES.memoryMeasure);
      if (memoryCgroup.kind === 'none' && config.handlerMemoryLimitBytes !== null) {
        log.warn(
          { why: memoryCgroup.why },
          'no memory cgroup: --handler-memory-limit (TAGSCHED_HANDLER_MEMORY_LIMIT) is not applied',
        );
      }
    }
    const choice = chooseCredential(config, readState(config.stateFile));
    if (choice.kind === 'none') {
      log.error({ reason: choice.reason }, 'cannot start');
      return exit(EXIT_CODES.usage);
    }
    let token: string;
    let workerName: string | null;
    if (config.rotateToken) {
      if (choice.kind !== 'token') {
        log.error({ reason: 'no worker token to rotate: the agent has not been activated yet' }, 'cannot start');
        return exit(EXIT_CODES.usage);
      }
      return exit(await rotate(config, log, choice.token, choice.source, stopping.signal));
    }
    if (choice.kind === 'token') {
      ({ token, workerName } = choice);
    } else {
      if (choice.replacesStateFor)
        log.warn(
          { stateFile: config.stateFile, server: choice.replacesStateFor },
          'the state file is for another server: activating again',
        );
      const state = await activate(config, log, choice.activationToken, stopping.signal);
      ({ workerToken: token, workerName } = state);
    }
    if (workerName !== null) log.setBindings({ worker: workerName });
    if (stopping.signal.aborted) return exit(EXIT_CODES.drained);

    const probe = systemProbe(env);
    // Measured once, before the first report of the facts, which waits for it; a failure reports none.
    const speed: Promise<HostSpeed | null> =
      config.speedTestMs > 0
        ? measureSpeed({ budgetMs: config.speedTestMs, threads: os.availableParallelism() }).then(
            (s) => {
              log.info({ single: s.single, all: s.all, threads: s.threads }, MESSAGES.speedMeasured);
              return s;
            },
            (err: unknown) => {
              log.warn({ error: (err as Error).message }, 'host speed not measured');
              return null;
            },
          )
        : Promise.resolve(null);
    let stream: AssignmentStream | null = null;
    agent = createAgent({
      config,
      log,
      api: createApi(
        preferConnection(
          createHttpRequest({ url: config.serverUrl, token, timeoutMs: config.requestTimeoutMs }),
          () => stream,
          OVER_CONNECTION,
        ),
      ),
      openStream: (handlers) =>
        (stream = openAssignmentStream({
          wsUrl: config.wsUrl,
          token,
          maxBackoffMs: config.maxBackoffMs,
          keepAliveMs: config.keepAliveMs,
          handshakeTimeoutMs: config.requestTimeoutMs,
          requestTimeoutMs: config.requestTimeoutMs,
          log,
          ...handlers,
        })),
      detectFacts: async () => ({ ...(await detectFacts(probe, config.workDir)), speed: await speed }),
      startRun: (spec) =>
        startRun({
          ...spec,
          isolation: isolation ?? undefined,
          memoryCgroup: memoryCgroup ?? undefined,
        }),
      load: () => ({ cpuCount: os.availableParallelism(), load1: os.loadavg()[0] }),
      env,
      workerName,
      interruptionNotice:
        config.interruptionNotice === 'ec2'
          ? ec2SpotNotice(config.metadataUrl, Math.min(config.requestTimeoutMs, 5_000))
          : undefined,
    });
    if (config.interruptionNotice !== 'none')
      log.info({ source: config.interruptionNotice, url: config.metadataUrl }, 'watching for interruption notices');
    return exit(await agent.run());
  } catch (err) {
    if (err instanceof StoppedError) return exit(EXIT_CODES.drained);
    if (err instanceof AuthError || err instanceof ActivationRefusedError) {
      log.error({ detail: err.message }, 'the server refused the activation token');
      return exit(EXIT_CODES.tokenRefused);
    }
    if (err instanceof StateFileError || err instanceof IsolationError) {
      log.error({ detail: err.message }, 'cannot start');
      return exit(EXIT_CODES.usage);
    }
    log.fatal({ err }, 'unexpected error');
    return exit(EXIT_CODES.failure);
  }
}

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`tagsched-worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(EXIT_CODES.failure);
  },
);
