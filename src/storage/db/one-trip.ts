import type { EntityManager } from '@mikro-orm/postgresql';

/** One statement of a trip: its SQL, `?` marking each parameter as EntityManager.execute takes them, and the parameters. */
export interface TripStatement {
  readonly sql: string;
  readonly params?: readonly unknown[];
}

/**
 * Runs statements in one round trip to PostgreSQL and returns each one's rows, in order.
 * EntityManager.execute writes the parameters into the SQL text and sends it over the simple query
 * protocol, which takes several statements in one message: PostgreSQL plans and runs each after the
 * one before it has run, each with a snapshot of its own (READ COMMITTED), exactly as if they had
 * been sent one by one. So a lock taken by one is held when the next one reads, and a setting made by
 * one applies to the planning of the next. What it saves is the waits between them: with PostgreSQL,
 * the server and its clients sharing two cores, a round trip is a millisecond or more.
 *
 * Runs in the EntityManager's transaction when it has one (a failed statement aborts it, and the
 * statements after it are not run); outside one, PostgreSQL runs the trip as one implicit transaction.
 * No statement may end with a `;` of its own, and each must hold exactly as many `?` as it has
 * parameters (both are checked, and refused before anything is sent). Errors from PostgreSQL are the
 * driver's exceptions, as EntityManager.execute throws them.
 */
export async function executeInOneTrip<T extends readonly unknown[][]>(
  em: EntityManager,
  statements: readonly TripStatement[],
): Promise<T> {
  if (!statements.length) return [] as unknown as T;
  // The parameters are matched to the `?` of the whole text in order: a `?` that is not one (an operator
  // such as `?|`, a literal) would shift every later one, and a `;` of a statement's own would shift the results.
  for (const s of statements) {
    const marks = s.sql.split('?').length - 1;
    const given = s.params?.length ?? 0;
    if (marks !== given)
      throw new Error(
        `executeInOneTrip: a statement has ${marks} \`?\` for ${given} parameters: ${s.sql.trim().slice(0, 80)}`,
      );
    if (/;\s*$/.test(s.sql))
      throw new Error(`executeInOneTrip: a statement ends with its own \`;\`: ${s.sql.trim().slice(0, 80)}`);
  }
  const sql = statements.map((s) => s.sql).join(';\n');
  const params = statements.flatMap((s) => s.params ?? []);
  const result = await em.execute<unknown[]>(sql, params);
  // One statement answers its rows; several answer a list of row lists.
  return (statements.length === 1 ? [result] : result) as unknown as T;
}
