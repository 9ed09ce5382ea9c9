/**
 * The readers of environment variables the sections share (src/core/config/config.ts). Each refuses a
 * value it cannot use with a ConfigError naming the variable; an unset or empty variable gives the fallback.
 */

/** A configuration the service refuses to start with; server.ts prints its message as one line. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** A number of 0 or more. */
export function intVar(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new ConfigError(`${name} must be a non-negative number, got "${raw}"`);
  return n;
}

/** A number above 0 (a lifetime that must not be nil). */
export function positiveIntVar(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const n = intVar(env, name, fallback);
  if (n <= 0) throw new ConfigError(`${name} must be above 0, got "${env[name]}"`);
  return n;
}

/** A whole number from 0 to `max` (a port, a count of things to run). */
export function countVar(env: NodeJS.ProcessEnv, name: string, fallback: number, max: number): number {
  const n = intVar(env, name, fallback);
  if (!Number.isInteger(n) || n > max)
    throw new ConfigError(`${name} must be a whole number from 0 to ${max}, got "${env[name]}"`);
  return n;
}

/** A yes/no variable (1/0, true/false, yes/no, on/off). */
export function boolVar(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

/** An http(s) URL, without its trailing slashes. */
export function urlVar(env: NodeJS.ProcessEnv, name: string, fallback: string): string;
export function urlVar(env: NodeJS.ProcessEnv, name: string, fallback: null): string | null;
export function urlVar(env: NodeJS.ProcessEnv, name: string, fallback: string | null): string | null {
  const raw = env[name];
  if (!raw) return fallback;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfigError(`${name} must be an http(s) URL, got "${raw}"`);
  return raw.replace(/\/+$/, '');
}
