import { z } from 'zod';
import { validateTagList } from '../../tags/syntax.js';
import type { TagSide } from '../../tags/types.js';
import { ERROR_CODES, InputError, type InputProblem } from '../../errors.js';

/** Names of scopes, workspaces, groups, pools, workers and rules: no spaces, no slashes. */
export const nameSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(100, 'must be at most 100 characters')
  .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/, 'may contain only letters, digits and . _ + - (and start with a letter or digit)');

/** Deepest nesting of objects and lists accepted in a client value (taskData, provider accounts, …). */
export const MAX_INPUT_DEPTH = 32;
/** A refused value lists at most this many problems: a megabyte of NULs must not make a megabyte of answer. */
const MAX_LISTED_PROBLEMS = 20;

/**
 * What PostgreSQL or JSON would choke on in a client value, found without recursion (so that no
 * nesting overflows the stack): NUL characters in strings and keys (PostgreSQL text and jsonb cannot
 * hold U+0000) and nesting deeper than {@link MAX_INPUT_DEPTH} (JSON.stringify overflows the stack).
 * Every argument of every GraphQL field goes through it before its resolver runs (input-guard.ts).
 */
export function clientInputProblems(value: unknown, path: string): InputProblem[] {
  const problems: InputProblem[] = [];
  const problem = (where: string, message: string) => problems.push({ code: ERROR_CODES.INVALID_INPUT, message: `${where}: ${message}`, path: where, tag: null });
  const nul = 'contains a NUL character (U+0000), which is not accepted';
  const stack: { value: unknown; path: string; depth: number }[] = [{ value, path, depth: 0 }];
  while (stack.length && problems.length < MAX_LISTED_PROBLEMS) {
    const item = stack.pop()!;
    if (typeof item.value === 'string') {
      if (item.value.includes('\u0000')) problem(item.path, nul);
      continue;
    }
    if (item.value === null || typeof item.value !== 'object' || item.value instanceof Date) continue;
    if (item.depth >= MAX_INPUT_DEPTH) {
      problem(item.path, `is nested more than ${MAX_INPUT_DEPTH} levels deep`);
      continue;
    }
    const entries = Array.isArray(item.value)
      ? item.value.map((v, i) => [`${item.path}[${i}]`, v] as const)
      : Object.entries(item.value).map(([k, v]) => {
          if (k.includes('\u0000')) problem(`${item.path}.${JSON.stringify(k.slice(0, 40))}`, `a key ${nul}`);
          return [`${item.path}.${k.replaceAll('\u0000', '\\0')}`, v] as const;
        });
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ value: entries[i][1], path: entries[i][0], depth: item.depth + 1 });
  }
  return problems;
}

/** Refuses a client value with every problem {@link clientInputProblems} finds in it (INVALID_INPUT). */
export function checkClientInput(value: unknown, path: string): void {
  const problems = clientInputProblems(value, path);
  if (problems.length) throw InputError.of(problems);
}

/** Every problem zod finds, as input problems (INVALID_INPUT) naming their paths. */
export function zodProblems<T>(schema: z.ZodType<T>, value: unknown, path: string): { data: T; problems: [] } | { data: null; problems: InputProblem[] } {
  const result = schema.safeParse(value);
  if (result.success) return { data: result.data, problems: [] };
  return {
    data: null,
    problems: result.error.issues.map((issue) => {
      // `input.specifications.enableBackends[1]`: list indexes as a client writes them.
      const where = issue.path.reduce<string>((at, key) => (typeof key === 'number' ? `${at}[${key}]` : `${at}.${String(key)}`), path);
      return { code: ERROR_CODES.INVALID_INPUT, message: `${where}: ${issue.message}`, path: where, tag: null };
    }),
  };
}

/** Parses input with a zod schema; every problem becomes part of one INVALID_INPUT error, the first naming its path. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, path: string): T {
  const parsed = zodProblems(schema, value, path);
  if (parsed.problems.length) throw InputError.of(parsed.problems);
  return parsed.data as T;
}

/** A string one of `values`, refused with a message that lists them. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, { error: () => `must be one of ${values.join(', ')}` });
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
