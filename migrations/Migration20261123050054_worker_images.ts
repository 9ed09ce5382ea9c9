import { Migration } from '@mikro-orm/migrations';

/**
 * Worker images (DESIGN §12): the manifests registered with the service, and on each pool the tags
 * of the image its specifications name (null for a pool with no image).
 */
export class Migration20261123050054_worker_images extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "worker_image" ("id" serial primary key, "name" varchar(100) not null, "manifest" jsonb not null, "registered_at" timestamptz not null);`,
    );
    this.addSql(`alter table "worker_image" add constraint "worker_image_name_unique" unique ("name");`);

    this.addSql(`alter table "worker_pool" add column "image_tags" text[] null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "worker_image" cascade;`);

    this.addSql(`alter table "worker_pool" drop column "image_tags";`);
  }
}
