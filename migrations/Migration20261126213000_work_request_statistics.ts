import { Migration } from '@mikro-orm/migrations';

/** What each run used, as its agent reported it with the result (entities/work-request-statistics.ts). */
export class Migration20261126213000_work_request_statistics extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "work_request_statistics" ("work_request_id" int not null, "setup_seconds" double precision not null, "run_seconds" double precision not null, "teardown_seconds" double precision not null, "cpu_seconds" double precision null, "peak_memory_bytes" bigint null, "peak_disk_bytes" bigint null, "cpu_count" int not null, "memory_method" text not null, "recorded_at" timestamptz not null default now(), constraint "work_request_statistics_pkey" primary key ("work_request_id"));`,
    );
    this.addSql(
      `alter table "work_request_statistics" add constraint "work_request_statistics_work_request_id_foreign" foreign key ("work_request_id") references "work_request" ("id") on update cascade on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "work_request_statistics" cascade;`);
  }
}
