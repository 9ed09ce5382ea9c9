/**
 * How a workflow ends once every child has: the children's results combined into one. ERROR wins
 * over FAILURE, which wins over SUCCESS: a child that could not run properly (ERROR, or ABORTED: it
 * never ran to a result) makes the whole ERROR; otherwise a child that ran and failed makes it
 * FAILURE; SKIPPED counts as success.
 */

/** A finished child, as the combination reads it. */
export interface FinishedChild {
  id: number;
  taskName: string;
  status: 'COMPLETED' | 'ABORTED';
  result: 'SUCCESS' | 'FAILURE' | 'ERROR' | 'SKIPPED' | null;
}

/** A workflow's own result, and the reason naming the children that did not succeed (null when all did). */
export interface CombinedResult {
  result: 'SUCCESS' | 'FAILURE' | 'ERROR';
  reason: string | null;
}

/** Children named in a reason at most; the rest are counted. */
const NAMED_AT_MOST = 10;

/** The outcome of one child, as the combination ranks it. */
function outcomeOf(c: FinishedChild): 'SUCCESS' | 'FAILURE' | 'ERROR' | 'ABORTED' {
  if (c.status === 'ABORTED') return 'ABORTED';
  if (c.result === 'FAILURE' || c.result === 'ERROR') return c.result;
  return 'SUCCESS'; // SUCCESS and SKIPPED
}

/** Combines the children's results; a workflow without children succeeds. */
export function combineChildResults(children: readonly FinishedChild[]): CombinedResult {
  const failed = children.map((c) => ({ c, outcome: outcomeOf(c) })).filter((x) => x.outcome !== 'SUCCESS');
  if (!failed.length) return { result: 'SUCCESS', reason: null };
  const result = failed.some((x) => x.outcome === 'ERROR' || x.outcome === 'ABORTED') ? 'ERROR' : 'FAILURE';
  const named = failed.slice(0, NAMED_AT_MOST).map((x) => `${x.c.id} (${x.c.taskName}) ${x.outcome}`);
  const more = failed.length > NAMED_AT_MOST ? `, and ${failed.length - NAMED_AT_MOST} more` : '';
  return {
    result,
    reason: `${failed.length} of ${children.length} children did not succeed: ${named.join(', ')}${more}`,
  };
}
