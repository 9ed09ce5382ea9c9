/**
 * Every provider call goes through here: the pool's account is opened for that call only, the call
 * gets a deadline (TAGSCHED_PROVIDER_TIMEOUT_SECONDS) and the service's stop signal, and whatever
 * it throws comes back as a ProviderError whose message carries none of the account's values.
 */
import { createHash } from 'node:crypto';
import type { WorkerPool } from '../../storage/entities/worker-pool.js';
import type { SecretBox } from '../../services/identity/secrets.js';
import { ProviderError, type ProviderCall } from '../../providers/provider.js';
import type { OfferingFailure } from '../../providers/offerings.js';
import { accountRedactor } from '../../providers/redact.js';

/** The longest provider message kept (a log line, `lastError`, an instance's `error`), in characters. */
const MAX_MESSAGE = 1000;
/** The longest provider code kept. */
const MAX_CODE = 200;

/** A message with every account value replaced (redact.ts), and then cut to a length fit for a log line and a page. */
export function scrub(message: string, account: Readonly<Record<string, unknown>> | null): string {
  return accountRedactor(account).head(message, MAX_MESSAGE);
}

/** A launch's offering failures with every account value replaced in their codes and reasons. */
export function scrubFailures(
  failures: readonly OfferingFailure[],
  account: Readonly<Record<string, unknown>> | null,
): OfferingFailure[] {
  const redact = accountRedactor(account);
  return failures.map((f) => ({
    ...f,
    code: f.code === null ? null : redact.head(f.code, MAX_CODE),
    reason: redact.head(f.reason, MAX_MESSAGE),
  }));
}

/**
 * Which provider account a pool launches on, as a short hash of its provider type and decrypted
 * account (pools that share an account share a key; pools without one, one key per provider type):
 * the key the account's launch rate limit counts by. Never the account itself.
 */
export function accountKey(
  pool: Pick<WorkerPool, 'providerType' | 'providerAccountEncrypted'>,
  secrets: SecretBox,
): string {
  let account: unknown = null;
  try {
    account = openAccount(pool, secrets);
  } catch {
    account = pool.providerAccountEncrypted; // cannot be opened: its launches fail anyway, counted apart
  }
  return createHash('sha256')
    .update(`${pool.providerType}\n${JSON.stringify(account)}`)
    .digest('hex')
    .slice(0, 32);
}

/** The pool's provider account, decrypted (null when it has none). */
export function openAccount(
  pool: Pick<WorkerPool, 'providerAccountEncrypted'>,
  secrets: SecretBox,
): Record<string, unknown> | null {
  if (!pool.providerAccountEncrypted) return null;
  return JSON.parse(secrets.open(pool.providerAccountEncrypted)) as Record<string, unknown>;
}

/**
 * Runs one provider operation for a pool within the timeout. A call that does not answer in time
 * fails as `timeout` even if the provider ignores its abort signal; any other failure that is not
 * a ProviderError becomes `unavailable`.
 */
export async function callProvider<T>(
  what: string,
  pool: Pick<WorkerPool, 'name' | 'providerAccountEncrypted' | 'specifications'>,
  deps: { secrets: SecretBox; timeoutMs: number; stopping: AbortSignal },
  run: (call: ProviderCall) => Promise<T>,
): Promise<T> {
  let account: Record<string, unknown> | null;
  try {
    account = openAccount(pool, deps.secrets);
  } catch {
    throw new ProviderError(
      'auth',
      `pool ${pool.name}: its provider account cannot be decrypted (was TAGSCHED_SECRET_KEY changed?)`,
    );
  }
  const deadline = new AbortController();
  const signal = AbortSignal.any([deps.stopping, deadline.signal]);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      deadline.abort();
      reject(new ProviderError('timeout', `pool ${pool.name}: ${what} took longer than ${deps.timeoutMs / 1000} s`));
    }, deps.timeoutMs);
  });
  try {
    return await Promise.race([
      run({
        pool: { name: pool.name, specifications: pool.specifications },
        account,
        signal,
        timeoutMs: deps.timeoutMs,
      }),
      late,
    ]);
  } catch (err) {
    if (err instanceof ProviderError) {
      const message = scrub(err.message, account);
      const code = err.providerCode === null ? null : accountRedactor(account).head(err.providerCode, MAX_CODE);
      const failures = scrubFailures(err.offeringFailures, account);
      const same =
        message === err.message &&
        code === err.providerCode &&
        failures.every(
          (f, i) => f.reason === err.offeringFailures[i]!.reason && f.code === err.offeringFailures[i]!.code,
        );
      throw same ? err : new ProviderError(err.kind, message, code, failures);
    }
    throw new ProviderError(
      'unavailable',
      scrub(`pool ${pool.name}: ${what} failed: ${err instanceof Error ? err.message : String(err)}`, account),
    );
  } finally {
    clearTimeout(timer);
  }
}
