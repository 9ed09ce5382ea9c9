/** Resources as input (a request's, a task rule's): figures out of range are refused with their paths. */
import { InputError, type ErrorCode } from '../../core/errors.js';
import { resourceInputProblems, type PartialResources } from '../../core/tasks/resource-request.js';

/** Refuses figures out of range: an InputError with every problem resourceInputProblems finds, under `code`. */
export function checkResourceInput(figures: PartialResources | null | undefined, path: string, code: ErrorCode): void {
  const problems = resourceInputProblems(figures, path);
  if (problems.length)
    throw InputError.of(problems.map((p) => ({ code, message: `${p.path}: ${p.message}`, path: p.path, tag: null })));
}
