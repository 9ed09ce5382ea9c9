import { Migration } from '@mikro-orm/migrations';

/** The memory limit an agent applied to a run's cgroup (--handler-memory-limit), kept with the run's figures: an out-of-memory kill under it counts as needing that much, not the whole worker's memory. */
export class Migration20261128120000_run_memory_limit extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "work_request_statistics" add column "memory_limit_bytes" bigint null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "work_request_statistics" drop column "memory_limit_bytes";`);
  }
}
