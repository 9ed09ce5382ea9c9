/**
 * What a command group of tagsched-admin works with: the process's streams, the global flags, the
 * context a command's action gets, and how a group registers its commands (program.ts wires them).
 */
import type { Command } from 'commander';
import type { Api } from './client.js';
import type { Output, Sink } from './output.js';
import type { Connection } from './settings.js';

/** What runAdmin needs from its process: streams, environment, and a signal for Ctrl-C. */
export interface AdminIo {
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: Sink & { isTTY?: boolean; columns?: number };
  readonly stderr: Sink;
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };
  /** Aborted on SIGINT or SIGTERM: a --watch or --follow ends cleanly. */
  readonly signal: AbortSignal;
  readonly fetch?: typeof fetch;
}

/** The global options, as every command sees them. */
export interface GlobalFlags {
  server?: string;
  config?: string;
  json: boolean;
  color: boolean;
  timeout: string;
}

/** What a command's action gets. */
export interface Ctx {
  readonly io: AdminIo;
  readonly out: Output;
  readonly flags: GlobalFlags;
  /** The connection (config file and environment are read on first use). */
  connection(): Connection;
  /**
   * The client for the connection. For people (no --json) every string it answers is made terminal-safe
   * (terminal-text.ts); `raw` keeps the data as the server sent it (a job's output printed as it is).
   */
  api(options?: { raw?: boolean }): Api;
}

/** A command's function. */
export type ActionFn = (ctx: Ctx, args: string[], opts: Record<string, any>) => Promise<void>;

/** How a command group adds its commands: `action(command, fn)` wires a command to its function. */
export type Register = (program: Command, action: (command: Command, fn: ActionFn) => Command) => void;
