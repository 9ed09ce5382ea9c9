/**
 * The `exec` provider: an admin-allowed command does the work, one run per call. The request is one
 * JSON document on stdin, the answer one JSON document on stdout (the protocol is in the README,
 * with `examples/exec-provider.mjs`). The provider account travels only on stdin: never on the
 * command line, in the environment or in a log; text the command writes back is redacted before
 * anything of it is cut (its stderr as it is kept, exec-process.ts).
 */
import path from 'node:path';
import { z } from 'zod';
import type { InputProblem } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import {
  PROVIDER_ERROR_KINDS,
  ProviderError,
  type LaunchSpec,
  type Provider,
  type ProviderCall,
  type ProviderInstance,
} from './provider.js';
import { callDeadline } from './deadline.js';
import { runCommand, type CommandRun } from './exec-process.js';
import { accountRedactor, type Redactor } from './redact.js';
import { problem, problemsMessage, specValue, SPECIFICATIONS_PATH, type PoolProviderInput } from './spec-checks.js';

/** The protocol's version, sent in every request; a command can refuse versions it does not know. */
export const EXEC_PROTOCOL_VERSION = 1;

export const EXEC_LIMITS = {
  /** An answer longer than this is cut and refused. */
  maxAnswerBytes: 1024 * 1024, // 1 MiB
  /** The tail of stderr kept for the log and for the error of a failed run (blanked before it is cut). */
  maxStderrBytes: 4096,
  /** How long stdout may stay open after the command exited (a child it left behind), in milliseconds. */
  closeGraceMs: 2000,
  maxArguments: 64,
  maxArgumentLength: 4096,
} as const;

/** What the exec provider needs from the server's configuration. */
export interface ExecSettings {
  /** The commands pools may name (absolute paths): `TAGSCHED_EXEC_COMMANDS`. */
  readonly allowedCommands: readonly string[];
  /** The environment commands run with (`ProvidersConfig.execEnvironment`). */
  readonly environment: Readonly<Record<string, string>>;
  readonly logger: Logger;
}

const COMMAND_PATH = `${SPECIFICATIONS_PATH}.command`;

/** What is wrong with a pool's `command`, against the commands the server allows. */
function commandProblems(command: unknown, allowedCommands: readonly string[]): InputProblem[] {
  const allowed = allowedCommands.length
    ? `one of the commands the server allows (TAGSCHED_EXEC_COMMANDS): ${allowedCommands.join(', ')}`
    : 'none: this server allows no exec command (TAGSCHED_EXEC_COMMANDS is empty)';
  if (command === undefined) return [problem(COMMAND_PATH, `is required: an argv list whose first item is ${allowed}`)];
  if (!Array.isArray(command) || command.length === 0 || !command.every((arg) => typeof arg === 'string')) {
    return [
      problem(
        COMMAND_PATH,
        `must be a non-empty list of strings (the argv, run without a shell) whose first item is ${allowed}`,
      ),
    ];
  }
  const problems: InputProblem[] = [];
  const [program, ...args] = command as string[];
  if (!allowedCommands.includes(program!))
    problems.push(
      problem(`${COMMAND_PATH}[0]`, `"${program!.slice(0, 200)}" is not allowed: the command must be ${allowed}`),
    );
  if (args.length > EXEC_LIMITS.maxArguments)
    problems.push(
      problem(COMMAND_PATH, `at most ${EXEC_LIMITS.maxArguments} arguments are accepted, got ${args.length}`),
    );
  args.forEach((arg, i) => {
    if (arg.length > EXEC_LIMITS.maxArgumentLength || arg.includes('\0')) {
      problems.push(
        problem(
          `${COMMAND_PATH}[${i + 1}]`,
          `an argument must be at most ${EXEC_LIMITS.maxArgumentLength} characters, with no NUL`,
        ),
      );
    }
  });
  return problems;
}

/** Checks an exec pool: its `command` must be allowed by the server. Any account (a JSON object) is passed on as it is. */
export function validateExecPool(
  input: PoolProviderInput,
  settings: Pick<ExecSettings, 'allowedCommands'>,
): InputProblem[] {
  return commandProblems(specValue(input.specifications, 'command'), settings.allowedCommands);
}

// Answers. Unknown fields are ignored, so that commands may say more than the protocol asks.
const text = z
  .string()
  .min(1)
  .max(1000)
  .regex(/^[^\0-\x1f]*$/, 'has control characters');
const errorAnswer = z.object({
  error: z.object({
    kind: z.enum(PROVIDER_ERROR_KINDS),
    message: z.string().max(2000),
    code: z.string().max(200).nullish(),
  }),
});
const launchAnswer = z.object({ id: text });
const terminateAnswer = z.object({});
const listAnswer = z.object({
  instances: z
    .array(
      z.object({
        id: text,
        name: text.nullish(),
        state: z.enum(['starting', 'running', 'stopping', 'gone']),
        createdAt: z.iso.datetime({ offset: true }).nullish(),
      }),
    )
    .max(100_000),
});

type Operation = 'launch' | 'terminate' | 'list';

/** Creates the exec provider: every call runs the `command` of the call's pool. */
export function createExecProvider(settings: ExecSettings): Provider {
  const log = settings.logger.child({ provider: 'exec' });

  async function call<T>(
    operation: Operation,
    request: Record<string, unknown>,
    answer: z.ZodType<T>,
    providerCall: ProviderCall,
    alsoSecret: readonly string[] = [],
  ): Promise<T> {
    const what = `exec ${operation}`;
    const redact = accountRedactor(providerCall.account, { also: alsoSecret });
    const { name: pool, specifications } = providerCall.pool;
    const problems = commandProblems(specValue(specifications, 'command'), settings.allowedCommands);
    if (problems.length)
      throw new ProviderError('invalid', `${what}: ${problemsMessage(problems)}`, 'command_not_allowed');
    const argv = specifications.command as string[];
    const deadline = callDeadline(providerCall);
    const started = Date.now();
    const input = JSON.stringify({
      version: EXEC_PROTOCOL_VERSION,
      operation,
      pool,
      account: providerCall.account ?? null,
      ...request,
    });
    const run = await runCommand(argv, {
      input,
      env: settings.environment,
      signal: deadline.signal,
      maxStdoutBytes: EXEC_LIMITS.maxAnswerBytes,
      maxStderrBytes: EXEC_LIMITS.maxStderrBytes,
      redact,
      closeGraceMs: EXEC_LIMITS.closeGraceMs,
    });
    const facts = {
      pool,
      operation,
      command: path.basename(argv[0]!),
      exitCode: run.exitCode,
      exitSignal: run.exitSignal,
      ms: Date.now() - started,
    };
    try {
      const result = interpret(what, run, answer, redact, deadline.failure.bind(deadline));
      log.debug({ ...facts, stderr: run.stderr || undefined }, 'exec provider call');
      return result;
    } catch (err) {
      const e = err as ProviderError;
      log.warn(
        { ...facts, kind: e.kind, code: e.providerCode, err: e.message, stderr: run.stderr || undefined },
        'exec provider call failed',
      );
      throw err;
    }
  }

  return {
    async launch(spec: LaunchSpec, providerCall) {
      const request = {
        name: spec.name,
        specifications: spec.specifications,
        agent: spec.agent,
        userData: spec.userData,
      };
      return call('launch', request, launchAnswer, providerCall, [spec.agent.activationToken]);
    },
    async terminate(id, providerCall) {
      await call('terminate', { id }, terminateAnswer, providerCall);
    },
    async list(_pool, providerCall) {
      const { instances } = await call('list', {}, listAnswer, providerCall);
      return instances.map((i): ProviderInstance => ({
        id: i.id,
        name: i.name ?? null,
        state: i.state,
        createdAt: i.createdAt ? new Date(i.createdAt) : null,
      }));
    },
  };
}

/** Reads a finished run as the protocol says: an error answer, a failed run, or the expected answer. */
function interpret<T>(
  what: string,
  run: CommandRun,
  answer: z.ZodType<T>,
  redact: Redactor,
  cutShort: (what: string) => ProviderError,
): T {
  if (run.spawnError) {
    throw new ProviderError(
      'invalid',
      `${what}: the command could not be started (${run.spawnError.code ?? run.spawnError.message})`,
      run.spawnError.code ?? 'spawn_failed',
    );
  }
  if (run.cut === 'aborted') throw cutShort(what);
  if (run.cut === 'answer-too-large') {
    throw new ProviderError(
      'invalid',
      `${what}: the answer passed ${EXEC_LIMITS.maxAnswerBytes} bytes and was cut`,
      'answer_too_large',
    );
  }
  const status = run.exitCode !== null ? `exit ${run.exitCode}` : `signal ${run.exitSignal}`;
  let document: unknown;
  try {
    document = run.stdout.trim() ? JSON.parse(run.stdout) : undefined;
  } catch {
    document = undefined;
  }
  const failed = errorAnswer.safeParse(document);
  if (failed.success) {
    const { kind, message, code } = failed.data.error;
    throw new ProviderError(kind, `${what}: ${redact(message)}`, code ? redact(code) : status);
  }
  if (run.exitCode !== 0) {
    // Its stderr is blanked whole already (a secret of several lines included): the last lines of that.
    const said = redact.head(run.stderr.trim().split('\n').slice(-3).join(' / '), 500);
    throw new ProviderError('unavailable', `${what}: the command failed (${status})${said ? `: ${said}` : ''}`, status);
  }
  if (document === undefined)
    throw new ProviderError('invalid', `${what}: the answer is not a JSON document`, 'malformed_answer');
  const parsed = answer.safeParse(document);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? issue.path.join('.') : 'the answer';
    throw new ProviderError('invalid', `${what}: malformed answer: ${where}: ${issue.message}`, 'malformed_answer');
  }
  // An id or a name is shown to admins and kept in the database: it must not carry the account.
  if (redact.finds(JSON.stringify(parsed.data)))
    throw new ProviderError('invalid', `${what}: the answer carries the provider account`, 'malformed_answer');
  return parsed.data;
}
