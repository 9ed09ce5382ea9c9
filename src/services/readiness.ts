/** What the probes ask of the database (api/health.ts): whether it answers, and whether the migrations this code knows are applied. */
import type { EntityManager } from '@mikro-orm/postgresql';
import { textArray } from '../storage/db/arrays.js';

/** Resolves when the database answers a trivial statement; rejects when it does not. */
export async function databaseAnswers(em: EntityManager): Promise<void> {
  await em.getConnection().execute('select 1');
}

/** How many of these migrations the database has applied (one statement; rejects when the database does not answer). */
export async function appliedMigrationCount(em: EntityManager, names: readonly string[]): Promise<number> {
  const [{ n }] = await em
    .getConnection()
    .execute<{ n: number }[]>('select count(*)::int as n from mikro_orm_migrations where name = any(?::text[])', [
      textArray(names),
    ]);
  return n;
}
