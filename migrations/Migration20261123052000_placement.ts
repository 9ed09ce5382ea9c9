import { Migration } from '@mikro-orm/migrations';

/**
 * Placement (DESIGN §3, §17): when a worker last reported its metadata (freshness), its quarantine,
 * and the workers a released request is not offered to again until a time (scheduler/release-backoff.ts).
 */
export class Migration20261123052000_placement extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "worker" add column "metadata_reported_at" timestamptz null, add column "quarantined_at" timestamptz null, add column "quarantine_reason" text null;`,
    );
    // Workers that reported before this column existed: their last report was at least their last sign of life with tags.
    this.addSql(
      `update "worker" set "metadata_reported_at" = "last_seen_at" where "dynamic_metadata" <> '{}'::jsonb or "type" = 'server';`,
    );
    this.addSql(
      `create table "release_backoff" ("work_request_id" int not null, "worker_id" int not null, "until" timestamptz not null, constraint "release_backoff_pkey" primary key ("work_request_id", "worker_id"));`,
    );
    this.addSql(
      `alter table "release_backoff" add constraint "release_backoff_work_request_id_foreign" foreign key ("work_request_id") references "work_request" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "release_backoff" add constraint "release_backoff_worker_id_foreign" foreign key ("worker_id") references "worker" ("id") on update cascade on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "release_backoff" cascade;`);
    this.addSql(
      `alter table "worker" drop column "metadata_reported_at", drop column "quarantined_at", drop column "quarantine_reason";`,
    );
  }
}
