import { Migration } from '@mikro-orm/migrations';

/**
 * Task statistics: whether a run was killed for memory or hit a full disk (work_request_statistics), and
 * the daily histograms of run time, peak memory and peak disk per task and per task, package and
 * architecture, written as runs complete (scheduler/storage/task-statistics.ts).
 */
export class Migration20261128070000_task_statistics extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "work_request_statistics" add column "out_of_memory" boolean null, add column "disk_full" boolean null;`,
    );
    this.addSql(
      `create table "task_statistics_histogram" ("task_type" text not null, "task_name" text not null, "package" text not null, "architecture" text not null, "day" date not null, "metric" text not null, "bucket" int not null, "count" int not null, constraint "task_statistics_histogram_pkey" primary key ("task_type", "task_name", "package", "architecture", "metric", "day", "bucket"));`,
    );
    this.addSql(`create index "task_statistics_histogram_day" on "task_statistics_histogram" ("day");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "task_statistics_histogram";`);
    this.addSql(`alter table "work_request_statistics" drop column "out_of_memory", drop column "disk_full";`);
  }
}
