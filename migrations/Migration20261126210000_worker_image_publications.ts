import { Migration } from '@mikro-orm/migrations';

/**
 * Where a registered worker image was published (`tagsched-image publish`): one row per image,
 * provider and region, with the provider's id of the bootable image there (a Hetzner snapshot id,
 * an EC2 AMI id). A new publication to the same provider and region replaces the row.
 */
export class Migration20261126210000_worker_image_publications extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "worker_image_publication" ("id" serial primary key, "image_id" int not null, "provider" varchar(20) not null, "region" varchar(50) not null, "provider_image_id" varchar(100) not null, "published_at" timestamptz not null);`,
    );
    this.addSql(
      `alter table "worker_image_publication" add constraint "worker_image_publication_image_id_foreign" foreign key ("image_id") references "worker_image" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "worker_image_publication" add constraint "worker_image_publication_image_provider_region_unique" unique ("image_id", "provider", "region");`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "worker_image_publication" cascade;`);
  }
}
