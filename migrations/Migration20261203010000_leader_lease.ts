import { Migration } from '@mikro-orm/migrations';

/**
 * The leases of what must happen once across the replicas of one database (src/storage/db/leader-lease.ts):
 * one row per duty, held by one process for a term until it expires. A new holder takes the next term;
 * every provisioner write that comes before a provider call checks the term in its own transaction.
 */
export class Migration20261203010000_leader_lease extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "leader_lease" ("duty" text not null, "holder" text not null, "term" bigint not null, "acquired_at" timestamptz not null, "renewed_at" timestamptz not null, "expires_at" timestamptz not null, constraint "leader_lease_pkey" primary key ("duty"));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "leader_lease";`);
  }
}
