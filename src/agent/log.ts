/**
 * The agent's JSON log on stdout, and the messages that tests and operators look for: each
 * milestone of the protocol is one stable `msg` with its details as fields.
 */
import pino, { type Logger } from 'pino';

/** The `msg` of each milestone; the fields each one carries are listed beside it. */
export const MESSAGES = {
  starting: 'starting', // server, workDir, handlers, providedTags
  isolated: 'handlers are kept from the worker token', // isolation, handlerUser?, namespaces?, hidden
  memoryMeasure: 'how peak memory is measured', // memoryMethod, cgroup? (where the runs' leaves go), why? (no cgroup)
  unprotected: 'HANDLERS ARE NOT ISOLATED: a handler can read the worker token and act as this worker', // isolation, why, hint
  activated: 'activated', // worker, stateFile
  interrupted: 'the provider is taking this machine away: its work goes back to the queue', // action, time, running
  tokenRotated: 'token rotated: the new one is in the state file, the old one is revoked', // worker, stateFile
  connected: 'connected', // reconnect
  subscribed: 'subscribed',
  disconnected: 'disconnected', // code, reason
  reconnecting: 'reconnecting', // attempt, delayMs, cause (why the last connection ended or attempt failed)
  metadataReported: 'metadata reported', // status, architectures, executors, tools, tasks
  speedMeasured: 'host speed measured', // single, all, threads (speed.ts: the benchmark at start)
  tagRejected: 'tag rejected by the server', // tag, code, reason
  assignmentReceived: 'assignment received', // id, taskType, taskName
  duplicateIgnored: 'duplicate assignment ignored', // id
  started: 'started', // id, taskName, pid, parallel, logFile
  finished: 'finished', // id, result, exitCode | signal | error, durationMs
  measured: 'run measured', // id, setupSeconds, runSeconds, teardownSeconds, cpuSeconds, peakMemoryBytes, peakDiskBytes, cpuCount, memoryMethod, outOfMemory, diskFull
  outputRefused: 'output refused by the server: no more is sent', // id, code, message
  resultReported: 'result reported', // id, result
  resultDropped: 'result dropped', // id, result, code, message
  assignmentDropped: 'assignment dropped', // id, code, message
  released: 'released', // id, reason
  retrying: 'retrying', // operation, id?, attempt, delayMs, error
  serverDraining: 'drain state from the server', // draining (an admin's drainWorker/undrainWorker)
  draining: 'draining', // signal, running
  alreadyDraining: 'already draining', // signal
  parentGone: 'the process that started the agent is gone: draining as on SIGTERM', // formerParent
  tokenRefused: 'the server refused the token', // detail
  exited: 'exited', // code
} as const;

/** JSON lines on stdout, written synchronously so that nothing is lost when the process exits. */
export function createLogger(level: string): Logger {
  return pino(
    {
      level,
      base: { service: 'tagsched-worker' },
      // The agent never logs a token; this is the second line of defence.
      redact: {
        paths: ['token', '*.token', 'workerToken', 'activationToken', 'authorization', '*.authorization'],
        censor: '[redacted]',
      },
    },
    pino.destination({ dest: 1, sync: true }),
  );
}
export type { Logger };
