import { Migration } from '@mikro-orm/migrations';

/**
 * Where task statistics came from (scheduler/storage/task-statistics.ts): the histograms are kept per
 * workspace too (learned minimums read only the runs of a request's own workspace and of public ones),
 * and a new table keeps, per key, workspace, metric, day and worker, how many runs that worker reported
 * and the highest bucket of its figures (learned minimums need two workers, and one worker's outlier
 * does not decide alone: tasks/learned-requirements.ts).
 *
 * Rows written before this migration get workspace 0 (the column's default, no workspace: they count in Query.taskStatistics
 * and demand, and for learned minimums only where TAGSCHED_SHARED_HISTORY says the history is shared);
 * they have no worker rows. Their memory and disk rows in the top bucket (about 1.1e15 bytes and up)
 * are deleted: an unknown figure was counted there as 1 PiB, and no worker has that much.
 */
export class Migration20261202100000_task_statistics_sources extends Migration {
  override async up(): Promise<void> {
    this.addSql(`delete from "task_statistics_histogram" where "metric" in ('memory', 'disk') and "bucket" >= 710;`);
    this.addSql(`alter table "task_statistics_histogram" add column "workspace_id" int not null default 0;`);
    this.addSql(`alter table "task_statistics_histogram" drop constraint "task_statistics_histogram_pkey";`);
    this.addSql(
      `alter table "task_statistics_histogram" add constraint "task_statistics_histogram_pkey" primary key ("task_type", "task_name", "package", "architecture", "metric", "workspace_id", "day", "bucket");`,
    );
    this.addSql(
      `create table "task_statistics_worker" ("task_type" text not null, "task_name" text not null, "package" text not null, "architecture" text not null, "metric" text not null, "workspace_id" int not null, "worker_id" int not null, "day" date not null, "runs" int not null, "max_bucket" int not null, constraint "task_statistics_worker_pkey" primary key ("task_type", "task_name", "package", "architecture", "metric", "workspace_id", "worker_id", "day"));`,
    );
    this.addSql(`create index "task_statistics_worker_day" on "task_statistics_worker" ("day");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "task_statistics_worker";`);
    this.addSql(`alter table "task_statistics_histogram" drop constraint "task_statistics_histogram_pkey";`);
    // Rows of several workspaces for one key, day and bucket become one.
    this.addSql(
      `create temporary table "tsh_merged" as select "task_type", "task_name", "package", "architecture", "day", "metric", "bucket", sum("count")::int as "count" from "task_statistics_histogram" group by 1, 2, 3, 4, 5, 6, 7;`,
    );
    this.addSql(`delete from "task_statistics_histogram";`);
    this.addSql(`alter table "task_statistics_histogram" drop column "workspace_id";`);
    this.addSql(
      `insert into "task_statistics_histogram" select "task_type", "task_name", "package", "architecture", "day", "metric", "bucket", "count" from "tsh_merged";`,
    );
    this.addSql(`drop table "tsh_merged";`);
    this.addSql(
      `alter table "task_statistics_histogram" add constraint "task_statistics_histogram_pkey" primary key ("task_type", "task_name", "package", "architecture", "metric", "day", "bucket");`,
    );
  }
}
