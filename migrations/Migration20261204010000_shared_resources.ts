import { Migration } from '@mikro-orm/migrations';

/**
 * Shared resources (docs/reference/resources.md).
 *
 * A worker may offer its CPUs, memory and disk (`offers_resources`, `offered_*`) instead of identical
 * slots; a work request reserves some of them (`reserved_*`, frozen with its tags, with the source of each
 * figure in `resource_sources`), from the user's `user_resources`, a task rule's `resources`, the
 * statistics or the task's default. `worker_reservation` holds a worker for a pending request that does
 * not fit it yet. Existing workers keep their slots (false, 0); existing requests reserve nothing (0),
 * so they fit any worker, as before.
 */
export class Migration20261204010000_shared_resources extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "worker" add column "offers_resources" boolean not null default false, add column "offered_cpus" int not null default 0, add column "offered_memory_mib" int not null default 0, add column "offered_disk_mib" int not null default 0;`,
    );
    this.addSql(
      `alter table "work_request" add column "user_resources" jsonb null, add column "reserved_cpus" int not null default 0, add column "reserved_memory_mib" int not null default 0, add column "reserved_disk_mib" int not null default 0, add column "resource_sources" jsonb null;`,
    );
    this.addSql(`alter table "task_rule" add column "resources" jsonb null;`);
    this.addSql(
      `create table "worker_reservation" ("worker_id" int not null primary key, "work_request_id" int not null, "reserved_at" timestamptz not null, "starts_at" timestamptz not null, "lapsed_at" timestamptz null);`,
    );
    // A request holds at most one worker at a time; a lapsed reservation holds nothing.
    this.addSql(
      `create unique index "worker_reservation_request" on "worker_reservation" ("work_request_id") where "lapsed_at" is null;`,
    );
    this.addSql(
      `alter table "worker_reservation" add constraint "worker_reservation_worker_id_foreign" foreign key ("worker_id") references "worker" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "worker_reservation" add constraint "worker_reservation_work_request_id_foreign" foreign key ("work_request_id") references "work_request" ("id") on update cascade on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "worker_reservation" cascade;`);
    this.addSql(`alter table "task_rule" drop column if exists "resources";`);
    this.addSql(
      `alter table "work_request" drop column if exists "user_resources", drop column if exists "reserved_cpus", drop column if exists "reserved_memory_mib", drop column if exists "reserved_disk_mib", drop column if exists "resource_sources";`,
    );
    this.addSql(
      `alter table "worker" drop column if exists "offers_resources", drop column if exists "offered_cpus", drop column if exists "offered_memory_mib", drop column if exists "offered_disk_mib";`,
    );
  }
}
