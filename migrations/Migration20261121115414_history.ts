import { Migration } from '@mikro-orm/migrations';

/**
 * What the scheduler needs from history, kept as requests complete instead of read from all of it:
 * when each worker last completed work, and task durations summed per task and day. Both are filled
 * from the history there is.
 */
export class Migration20261121115414_history extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "task_duration" ("task_type" text not null, "task_name" text not null, "day" date not null, "runs" int not null default 0, "seconds" double precision not null default 0, constraint "task_duration_pkey" primary key ("task_type", "task_name", "day"));`,
    );
    this.addSql(`alter table "worker" add column "last_completed_at" timestamptz null;`);
    this.addSql(`update "worker" w set "last_completed_at" = h.last from (
      select "worker_id", max("completed_at") as last from "work_request" where "status" = 'COMPLETED' and "worker_id" is not null group by "worker_id"
    ) h where h."worker_id" = w."id";`);
    this.addSql(`insert into "task_duration" ("task_type", "task_name", "day", "runs", "seconds")
      select "task_type", "task_name", ("completed_at" at time zone 'UTC')::date, count(*), sum(extract(epoch from "completed_at" - "started_at"))
        from "work_request" where "status" = 'COMPLETED' and "started_at" is not null and "completed_at" is not null
       group by 1, 2, 3;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "task_duration" cascade;`);
    this.addSql(`alter table "worker" drop column "last_completed_at";`);
  }
}
