/**
 * Every PostgreSQL advisory-lock key the service takes, in one place: they coordinate server
 * processes sharing one database, so two of them must never share a number by accident. The
 * embedded database serves one process and takes none of the session-wide ones.
 */
export const ADVISORY_LOCKS = {
  /** Migrations one process after another (a session lock on a dedicated connection, orm.ts). */
  MIGRATE: 72707369,
  /** The first admin token made once, when several processes start on an empty database. */
  BOOTSTRAP: 72707370,
  /** Shared while a request is classified, exclusive while the set of significant tags grows (classes.ts). */
  CLASSIFY: 72707371,
  /** One scheduling pass at a time across processes (pass.ts). */
  PASS: 72707372,
  /** Held from creating a task class to commit, so that class ids become visible in id order (classes.ts). */
  CREATE_CLASS: 72707373,
  /** One provisioner cycle at a time across processes (provisioner.ts): no instance is launched twice. */
  PROVISIONER: 72707374,
} as const;
