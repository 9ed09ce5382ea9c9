/**
 * Turns zod's issues about a taskData into one line per bad field, addressed the way a client
 * wrote it (`taskData.bootstrap_repositories[0].suite`), so the fix is obvious without zod's jargon.
 */
import type { core } from 'zod';

/** One bad field of a taskData and what was expected there. */
export interface TaskDataProblem {
  path: string;
  text: string;
}

/** One problem per bad field, in zod's order; an unknown key is reported at its own path. */
export function describeTaskDataIssues(issues: readonly core.$ZodIssue[]): TaskDataProblem[] {
  return issues.flatMap(describeIssue);
}

/** Zod's messages start with a category ("Invalid input: ") that the path already makes obvious. */
const ZOD_MESSAGE_PREFIX = /^(Invalid input|Invalid option|Too small|Too big): /;

function describeIssue(issue: core.$ZodIssue): TaskDataProblem[] {
  const path = formatPath(issue.path);
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => ({ path: `${path}.${key}`, text: 'unknown key' }));
  }
  const text = issue.message.replace(ZOD_MESSAGE_PREFIX, '');
  return [{ path, text: text.charAt(0).toLowerCase() + text.slice(1) }];
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (acc, key) => (typeof key === 'number' ? `${acc}[${key}]` : `${acc}.${String(key)}`),
    'taskData',
  );
}
