import { DeadlockException } from '@mikro-orm/core';

const ATTEMPTS = 3;

/**
 * Runs a transaction again when PostgreSQL broke a deadlock by aborting it. Terminating a worker
 * locks the worker before its requests (so that no assignment slips in between), while a completion
 * locks its request before it updates the worker: when both meet on one worker, PostgreSQL aborts
 * one of them, and the terminating side simply tries again.
 */
export async function retryingDeadlocks<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (!(err instanceof DeadlockException) || attempt >= ATTEMPTS) throw err;
    }
  }
}
