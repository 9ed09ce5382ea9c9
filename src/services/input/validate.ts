import { z } from 'zod';
import { validateTagList } from '../../core/tags/syntax.js';
import type { TagSide } from '../../core/tags/types.js';
import { ERROR_CODES, InputError, type InputProblem } from '../../core/errors.js';

/** Names of scopes, workspaces, groups, pools, workers and rules: no spaces, no slashes. */
export const nameSchema = z
  .string()
  .min(1, 'must not be empty')
  .max(100, 'must be at most 100 characters')
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._+-]*$/,
    'may contain only letters, digits and . _ + - (and start with a letter or digit)',
  );

/** Deepest nesting of objects and lists accepted in a client value (taskData, provider accounts, …). */
export const MAX_INPUT_DEPTH = 32;
/** A refused value lists at most this many problems: a megabyte of NULs must not make a megabyte of answer. */
const MAX_LISTED_PROBLEMS = 20;

/** A value met by {@link clientInputProblems}: its path is written only for a problem. */
interface Visit {
  readonly value: unknown;
  readonly depth: number;
  readonly parent: Visit | null;
  /** The root's path, an index in a list, or a key of an object. */
  readonly key: string | number;
}

/** `input.requests[3].taskData.a`: list indexes as a client writes them; NULs in keys shown as \0. */
function pathOf(visit: Visit): string {
  if (visit.parent === null) return String(visit.key);
  const parent = pathOf(visit.parent);
  return typeof visit.key === 'number'
    ? `${parent}[${visit.key}]`
    : `${parent}.${visit.key.replaceAll('\u0000', '\\0')}`;
}

/**
 * What PostgreSQL or JSON would choke on in a client value, found without recursion (so that no
 * nesting overflows the stack): NUL characters in strings and keys (PostgreSQL text and jsonb cannot
 * hold U+0000) and nesting deeper than {@link MAX_INPUT_DEPTH} (JSON.stringify overflows the stack).
 * Every argument of every GraphQL field goes through it before its resolver runs (input-guard.ts).
 */
export function clientInputProblems(value: unknown, path: string): InputProblem[] {
  const problems: InputProblem[] = [];
  const problem = (where: string, message: string) =>
    problems.push({ code: ERROR_CODES.INVALID_INPUT, message: `${where}: ${message}`, path: where, tag: null });
  const nul = 'contains a NUL character (U+0000), which is not accepted';
  const stack: Visit[] = [{ value, depth: 0, parent: null, key: path }];
  while (stack.length && problems.length < MAX_LISTED_PROBLEMS) {
    const item = stack.pop()!;
    const v = item.value;
    if (typeof v === 'string') {
      if (v.includes('\u0000')) problem(pathOf(item), nul);
      continue;
    }
    if (v === null || typeof v !== 'object' || v instanceof Date) continue;
    if (item.depth >= MAX_INPUT_DEPTH) {
      problem(pathOf(item), `is nested more than ${MAX_INPUT_DEPTH} levels deep`);
      continue;
    }
    // Children go on the stack last first, so that they are met in order.
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--)
        stack.push({ value: v[i] as unknown, depth: item.depth + 1, parent: item, key: i });
    } else {
      const keys = Object.keys(v);
      for (const k of keys)
        if (k.includes('\u0000')) problem(`${pathOf(item)}.${JSON.stringify(k.slice(0, 40))}`, `a key ${nul}`);
      for (let i = keys.length - 1; i >= 0; i--)
        stack.push({
          value: (v as Record<string, unknown>)[keys[i]],
          depth: item.depth + 1,
          parent: item,
          key: keys[i],
        });
    }
  }
  return problems;
}

/** Refuses a client value with every problem {@link clientInputProblems} finds in it (INVALID_INPUT). */
export function checkClientInput(value: unknown, path: string): void {
  const problems = clientInputProblems(value, path);
  if (problems.length) throw InputError.of(problems);
}

/** Every problem zod finds, as input problems (INVALID_INPUT) naming their paths. */
export function zodProblems<T>(
  schema: z.ZodType<T>,
  value: unknown,
  path: string,
): { data: T; problems: [] } | { data: null; problems: InputProblem[] } {
  const result = schema.safeParse(value);
  if (result.success) return { data: result.data, problems: [] };
  return {
    data: null,
    problems: result.error.issues.map((issue) => {
      // `input.specifications.enableBackends[1]`: list indexes as a client writes them.
      const where = issue.path.reduce<string>(
        (at, key) => (typeof key === 'number' ? `${at}[${key}]` : `${at}.${String(key)}`),
        path,
      );
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
    return [
      {
        code: ERROR_CODES.TOO_MANY_TAGS,
        message: `${path}: at most ${maxTags} tags are accepted, got ${tags.length}`,
        path,
        tag: null,
      },
    ];
  }
  return validateTagList(tags, side).map((r) => ({
    code: ERROR_CODES.INVALID_TAG,
    message: r.message,
    path: `${path}[${tags.indexOf(r.tag)}]`,
    tag: r.tag,
  }));
}

/** Splits `scope/name` (the way workspaces are written in inputs). */
export function splitWorkspaceName(full: string, path: string): { scope: string; name: string } {
  const parts = full.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new InputError(
      ERROR_CODES.INVALID_INPUT,
      `${path}: a workspace is written "scope/name", got "${full}"`,
      path,
    );
  }
  return { scope: parts[0], name: parts[1] };
}

/**
 * The JSON text of a value that JSON writes exactly (null, booleans, finite numbers but -0, strings,
 * arrays without holes, objects of Object.prototype or none, without toJSON), so that two values
 * with the same text are the same value: a key for memoising pure work over client data (a batch's
 * identical requests are analysed once: services/work/create-work-requests.ts). Null when the value
 * holds anything else (undefined, a Date, a Map, NaN…), whose text could stand for another value.
 */
export function jsonKey(value: unknown): string | null {
  let exact = true;
  const text = JSON.stringify(value, function (this: Record<string, unknown>, key: string, written: unknown) {
    const original = this[key]; // as it is, before any toJSON
    switch (typeof original) {
      case 'string':
      case 'boolean':
        break;
      case 'number':
        if (!Number.isFinite(original) || Object.is(original, -0)) exact = false;
        break;
      case 'object':
        if (original === null) break;
        if (Array.isArray(original)) {
          for (let i = 0; i < original.length; i++) if (!(i in original)) exact = false;
        } else {
          const proto = Object.getPrototypeOf(original) as unknown;
          if (
            (proto !== Object.prototype && proto !== null) ||
            typeof (original as { toJSON?: unknown }).toJSON === 'function'
          )
            exact = false;
        }
        break;
      default:
        exact = false;
    }
    return exact ? written : undefined;
  });
  return exact && text !== undefined ? text : null;
}
