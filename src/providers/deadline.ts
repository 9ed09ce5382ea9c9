import { ProviderError, type ProviderCall } from './provider.js';

/** One provider call's abort signal: the caller's, or the call's own time running out. */
export interface CallDeadline {
  readonly signal: AbortSignal;
  /** The error for a call that was cut: `timeout` when its time ran out, `unavailable` when it was cancelled. */
  failure(what: string): ProviderError;
}

function isTimeout(reason: unknown): boolean {
  return reason instanceof Error && reason.name === 'TimeoutError';
}

/** The deadline of a call: `call.signal` and `call.timeoutMs`, whichever comes first. */
export function callDeadline(call: ProviderCall): CallDeadline {
  const own = AbortSignal.timeout(Math.max(1, call.timeoutMs));
  const signal = AbortSignal.any([call.signal, own]);
  return {
    signal,
    failure(what) {
      if (own.aborted || isTimeout(call.signal.reason)) {
        return new ProviderError('timeout', `${what}: no answer within ${call.timeoutMs} ms`, 'timeout');
      }
      return new ProviderError('unavailable', `${what}: cancelled before it finished`, 'cancelled');
    },
  };
}
