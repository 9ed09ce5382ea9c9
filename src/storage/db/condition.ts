import { ALIAS_REPLACEMENT, raw, type FilterQuery } from '@mikro-orm/core';

/** A boolean SQL expression over one row (named by the alias it was built for), with its `?` parameters. */
export interface SqlCondition {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/** A condition that every row meets. */
export const ALWAYS: SqlCondition = { sql: 'true', params: [] };
/** A condition that no row meets. */
export const NEVER: SqlCondition = { sql: 'false', params: [] };

/**
 * A condition built for a table alias, as a MikroORM filter on that table's entity: the ORM puts its
 * own alias for the row in place of the placeholder and uses the expression as it is.
 */
export function asFilter<T>(build: (alias: string) => SqlCondition): FilterQuery<T> {
  const condition = build(ALIAS_REPLACEMENT);
  return { [raw(condition.sql, [...condition.params])]: [] } as FilterQuery<T>;
}
