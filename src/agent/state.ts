/**
 * Which token the agent uses, and the state file that keeps an activated one: a pool worker
 * trades its one-shot activation token once, and later starts read the worker token back.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { AgentConfig } from './config.js';

/** What the state file holds (JSON, mode 0600). */
export interface AgentState {
  workerToken: string;
  workerName: string;
  /** The server the token belongs to: it is never sent anywhere else. */
  server: string;
}

const stateSchema = z.object({ workerToken: z.string().min(1), workerName: z.string(), server: z.string() });

/** The state file exists but cannot be used; the message names the file and what to do. */
export class StateFileError extends Error {
  override readonly name = 'StateFileError';
}

/** Reads the state file; null when there is none. */
export function readState(file: string): AgentState | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new StateFileError(`cannot read the state file ${file}: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  const parsed = stateSchema.safeParse(json);
  if (!parsed.success)
    throw new StateFileError(
      `the state file ${file} is not valid (expected workerToken, workerName, server): fix or remove it`,
    );
  return parsed.data;
}

/** Writes the state file atomically (a temporary file renamed over it), readable by its owner only. */
export function writeState(file: string, state: AgentState): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  fs.chmodSync(tmp, 0o600); // in case the file existed with wider permissions
  fs.renameSync(tmp, file);
}

/** The token to use, or the activation to do first, or why neither is possible. */
export type CredentialChoice =
  | { kind: 'token'; token: string; source: 'option' | 'state-file'; workerName: string | null }
  | { kind: 'activate'; activationToken: string; replacesStateFor: string | null }
  | { kind: 'none'; reason: string };

/**
 * `--token` wins; then the state file's token, when it belongs to this server; then an
 * activation with `--activation-token`. A state file for another server is never used: its
 * token would be sent to a server it does not belong to.
 */
export function chooseCredential(
  config: Pick<AgentConfig, 'token' | 'activationToken' | 'serverUrl' | 'stateFile'>,
  state: AgentState | null,
): CredentialChoice {
  if (config.token) return { kind: 'token', token: config.token, source: 'option', workerName: null };
  if (state && state.server === config.serverUrl) {
    return { kind: 'token', token: state.workerToken, source: 'state-file', workerName: state.workerName };
  }
  if (config.activationToken)
    return { kind: 'activate', activationToken: config.activationToken, replacesStateFor: state?.server ?? null };
  if (state) {
    return {
      kind: 'none',
      reason: `the state file ${config.stateFile} holds a token for ${state.server}, not ${config.serverUrl}: pass --token or --activation-token, or use the other server`,
    };
  }
  return {
    kind: 'none',
    reason:
      'no worker token: pass --token (TAGSCHED_WORKER_TOKEN), or --activation-token (TAGSCHED_ACTIVATION_TOKEN) for a first start',
  };
}
