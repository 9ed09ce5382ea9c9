/** The PostgreSQL server the tests use: TEST_DATABASE_URL's server, or the local one. */
const base = new URL(process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres');

/** A URL for the maintenance database (create and drop databases). */
export function adminUrl(): string {
  return base.toString();
}

/** A URL for a named database on the same server. */
export function databaseUrl(name: string): string {
  const u = new URL(base.toString());
  u.pathname = `/${name}`;
  return u.toString();
}
