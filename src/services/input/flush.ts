import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { AlreadyExistsError } from '../../core/errors.js';

/**
 * Runs a write that creates something named; when a concurrent caller created the same name between
 * our check and our commit, the unique constraint answers, and the client gets ALREADY_EXISTS.
 */
export async function creating<T>(what: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException) throw new AlreadyExistsError(`${what} already exists`);
    throw err;
  }
}
