import { Migration } from '@mikro-orm/migrations';

/**
 * Quarantine probes (DESIGN §17, services/quarantine-probes.ts): a work request the server gave a
 * quarantined worker to see whether it runs work again is marked as such, and a worker's probes are
 * found through a partial index (when it was last probed, and how that went).
 */
export class Migration20261123070000_quarantine_probe extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "work_request" add column "quarantine_probe" boolean not null default false;`);
    this.addSql(
      `create index "work_request_quarantine_probe" on "work_request" ("worker_id", "id") where "quarantine_probe";`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "work_request_quarantine_probe";`);
    this.addSql(`alter table "work_request" drop column "quarantine_probe";`);
  }
}
