/**
 * Finding one work request by id, for the `work` commands: a usage error for an id that is not a
 * number, NOT_FOUND (exit 3) for one the token cannot see.
 */
import { AdminError, EXIT, usageError } from './exit-codes.js';
import type { Ctx } from './command-context.js';

/** A work request id as the API takes it (usage error otherwise). */
export function checkId(id: string): string {
  if (!/^\d{1,18}$/.test(id)) throw usageError(`a work request id is a number, got ${JSON.stringify(id)}`);
  return id;
}

/** The work request, or NOT_FOUND (exit 3): unknown, or not visible to the token; `raw` as in Ctx.api. */
export async function fetchOne<T>(
  ctx: Ctx,
  document: string,
  id: string,
  variables: Record<string, unknown> = {},
  raw = false,
): Promise<{ workRequest: T }> {
  const data = await ctx.api({ raw }).query<{ workRequest: T | null }>(document, { ...variables, id: checkId(id) });
  if (!data.workRequest)
    throw new AdminError(`no work request ${id} (or you may not see it)`, EXIT.notFound, 'NOT_FOUND');
  return data as { workRequest: T };
}
