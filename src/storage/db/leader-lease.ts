import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * The leases of what must happen once across the server processes of one database (docs/operating/replicas.md):
 * a row per duty in `leader_lease`, held by one process (`holder`, its process name) for a `term` until
 * `expires_at`. The database's clock decides expiry, so the processes' clocks need not agree. A holder
 * renews its term while the lease has not expired; anyone takes an expired lease with the next term; a
 * process restarted under the same name takes its predecessor's lease at once, with the next term. The
 * only statements on the table are here.
 */

/** A lease as the database has it. */
export interface LeaseRow {
  readonly duty: string;
  readonly holder: string;
  readonly term: number;
  readonly acquiredAt: Date;
  readonly renewedAt: Date;
  readonly expiresAt: Date;
}

interface RawLease {
  duty: string;
  holder: string;
  term: string | number;
  acquired_at: Date | string;
  renewed_at: Date | string;
  expires_at: Date | string;
}

const asLease = (r: RawLease): LeaseRow => ({
  duty: r.duty,
  holder: r.holder,
  term: Number(r.term),
  acquiredAt: new Date(r.acquired_at),
  renewedAt: new Date(r.renewed_at),
  expiresAt: new Date(r.expires_at),
});

/**
 * Takes or renews the lease of `duty` for `holder`, for `ttlMs` from now (one statement): renewed in
 * the same term when `holder` holds it in `term` and it has not expired; taken with the next term when
 * it has expired, or is held under `holder`'s name in another term (an earlier process of that name); the
 * first term is 1. Null when another process holds it.
 */
export async function claimLease(
  em: EntityManager,
  duty: string,
  holder: string,
  term: number | null,
  ttlMs: number,
): Promise<LeaseRow | null> {
  const rows = await em.execute<RawLease[]>(
    `insert into leader_lease as l (duty, holder, term, acquired_at, renewed_at, expires_at)
     values (?, ?, 1, now(), now(), now() + ? * interval '1 millisecond')
     on conflict (duty) do update set
       term = case when l.holder = excluded.holder and l.term = ?::bigint and l.expires_at > now() then l.term else l.term + 1 end,
       acquired_at = case when l.holder = excluded.holder and l.term = ?::bigint and l.expires_at > now() then l.acquired_at else now() end,
       holder = excluded.holder, renewed_at = now(), expires_at = excluded.expires_at
     where l.expires_at <= now() or l.holder = excluded.holder
     returning duty, holder, term, acquired_at, renewed_at, expires_at`,
    [duty, holder, ttlMs, term, term],
  );
  return rows.length ? asLease(rows[0]) : null;
}

/** Gives up a lease held in `term` (it expires now: the next holder takes the next term); false when it was no longer held. */
export async function releaseLease(em: EntityManager, duty: string, holder: string, term: number): Promise<boolean> {
  const rows = await em.execute<{ duty: string }[]>(
    `update leader_lease set expires_at = now() where duty = ? and holder = ? and term = ? and expires_at > now() returning duty`,
    [duty, holder, term],
  );
  return rows.length > 0;
}

/**
 * The fence of a write made for a duty: in the caller's transaction, true while `holder` holds the
 * lease in `term` and it has not expired. The lease's row is then locked (for share) until that
 * transaction ends, so no other process takes the lease before the write commits: a write fenced
 * here is made by the leader of its term or not at all.
 */
export async function holdsLease(tx: EntityManager, duty: string, holder: string, term: number): Promise<boolean> {
  const rows = await tx.execute<{ duty: string }[]>(
    `select duty from leader_lease where duty = ? and holder = ? and term = ? and expires_at > now() for share`,
    [duty, holder, term],
  );
  return rows.length > 0;
}

/** The leases, expired or not, by duty: the first `limit`. */
export async function readLeases(em: EntityManager, limit: number): Promise<LeaseRow[]> {
  const rows = await em.execute<RawLease[]>(
    `select duty, holder, term, acquired_at, renewed_at, expires_at from leader_lease order by duty limit ?`,
    [limit],
  );
  return rows.map(asLease);
}
