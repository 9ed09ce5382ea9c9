import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Runs one statement with its parameters bound: sent to PostgreSQL apart from the SQL text, as they
 * are. EntityManager.execute writes each parameter into the text instead, quoted and escaped one
 * character at a time: for a parameter of a hundred kilobytes (the rows of a batch of work requests)
 * that is milliseconds of CPU and megabytes of short-lived strings. `?` marks each parameter (so the
 * text must hold no other `?`). Runs in the EntityManager's transaction when it has one; errors are
 * the driver's exceptions, as EntityManager.execute throws them. Returns the rows.
 */
export async function executeBound<T>(
  em: EntityManager,
  sql: string,
  params: readonly (string | number | boolean | null)[],
): Promise<T[]> {
  const query = em
    .getConnection()
    .getKnex()
    .raw(sql, [...params]);
  const trx = em.getTransactionContext();
  if (trx) query.transacting(trx);
  try {
    const result = (await query) as { rows: T[] };
    return result.rows;
  } catch (err) {
    throw em.getDriver().convertException(err as Error);
  }
}
