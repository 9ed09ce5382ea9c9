import { Migration } from '@mikro-orm/migrations';

export class Migration20261121090446_worker_shutdown extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "worker" add column "shutting_down" boolean not null default false;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "worker" drop column "shutting_down";`);
  }
}
