import { z } from 'zod';
import { validateTagList } from '../tags/syntax.js';
import type { TagSide } from '../tags/types.js';
import { ERROR_CODES, InputError, type InputProblem } from '../errors.js';

/** Names of scopes, workspaces, groups, pools, workers and rules: no spaces, no slashes. */
export const nameSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(100, 'must be at most 100 characters')
  .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/, 'may contain only letters, digits and . _ + - (and start with a letter or digit)');

/** Parses input with a zod schema; the first problem becomes an INVALID_INPUT error naming its path. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, path: string): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const where = [path, ...issue.path.map(String)].join('.');
  throw new InputError(ERROR_CODES.INVALID_INPUT, `${where}: ${issue.message}`, where);
}

/** Checks lists of tags from a client, all of them at once: their number and their syntax. Nothing about provenance. */
export function checkTags(...sets: [tags: readonly string[], side: TagSide, path: string, maxTags: number][]): void {
  const problems = sets.flatMap(([tags, side, path, maxTags]) => tagProblems(tags, side, path, maxTags));
  if (problems.length) throw InputError.of(problems);
}

/** What is wrong with one list of tags: too many of them, or each tag that breaks the syntax. */
function tagProblems(tags: readonly string[], side: TagSide, path: string, maxTags: number): InputProblem[] {
  if (tags.length > maxTags) {
    return [{ code: ERROR_CODES.TOO_MANY_TAGS, message: `${path}: at most ${maxTags} tags are accepted, got ${tags.length}`, path, tag: null }];
  }
  return validateTagList(tags, side).map((r) => ({ code: ERROR_CODES.INVALID_TAG, message: r.message, path: `${path}[${tags.indexOf(r.tag)}]`, tag: r.tag }));
}

/** Splits `scope/name` (the way workspaces are written in inputs). */
export function splitWorkspaceName(full: string, path: string): { scope: string; name: string } {
  const parts = full.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new InputError(ERROR_CODES.INVALID_INPUT, `${path}: a workspace is written "scope/name", got "${full}"`, path);
  }
  return { scope: parts[0], name: parts[1] };
}
