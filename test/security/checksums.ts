/**
 * Row checksums of every table of the database, so that a probe can assert that a refusal changed
 * nothing at all: not only the tables it aims at, but any table (a scope made on the way, a token, a
 * task class, a significant tag). The list of tables is read from the catalog, so a table added by a
 * later migration is covered without touching this file. The replicas' liveness rows are left out: every
 * process writes its heartbeat (server_process) and renews its leases (leader_lease) on a timer, whatever
 * its clients do.
 */
import { expect } from 'vitest';
import type { TestApp } from '../helpers/app.js';

/** Per table: its row count and an md5 of all its rows as text, in a stable order. */
export async function tableChecksums(t: TestApp): Promise<Record<string, string>> {
  const tables = await t.sql<{ name: string }>(
    `select tablename as name from pg_tables where schemaname = 'public' and tablename not in ('mikro_orm_migrations', 'server_process', 'leader_lease') order by tablename`,
  );
  const out: Record<string, string> = {};
  for (const { name } of tables) {
    const [row] = await t.sql<{ n: number; sum: string | null }>(
      `select count(*)::int as n, md5(coalesce(string_agg(x::text, E'\\n' order by x::text), '')) as sum from "${name}" x`,
    );
    out[name] = `${row.n}:${row.sum}`;
  }
  return out;
}

/** Runs `probe` and checks that no row of any table changed; returns what the probe returned. */
export async function unchanged<T>(t: TestApp, probe: () => Promise<T>): Promise<T> {
  const before = await tableChecksums(t);
  const result = await probe();
  expect(await tableChecksums(t)).toEqual(before);
  return result;
}
