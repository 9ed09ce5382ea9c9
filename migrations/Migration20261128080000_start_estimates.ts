import { Migration } from '@mikro-orm/migrations';

/**
 * Start estimates (docs/reference/scheduling.md, "When will it start"): each pool's measured launch time
 * (an exponentially weighted mean of its instances' launch-to-first-connection, and how many launches
 * it is made of), the first estimate of a pending request, and per task class the last absolute errors
 * of those estimates (at most 100, newest last).
 */
export class Migration20261128080000_start_estimates extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "worker_pool" add column "launch_seconds" double precision null, add column "launch_samples" int not null default 0;`,
    );
    this.addSql(`alter table "work_request" add column "estimated_start_at" timestamptz null;`);
    this.addSql(
      `create table "class_start_estimate_error" ("class_id" int not null, "errors_seconds" double precision[] not null default '{}', constraint "class_start_estimate_error_pkey" primary key ("class_id"));`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "class_start_estimate_error" cascade;`);
    this.addSql(`alter table "work_request" drop column if exists "estimated_start_at";`);
    this.addSql(
      `alter table "worker_pool" drop column if exists "launch_seconds", drop column if exists "launch_samples";`,
    );
  }
}
