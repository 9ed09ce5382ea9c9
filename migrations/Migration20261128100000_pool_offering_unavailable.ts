import { Migration } from '@mikro-orm/migrations';

/** Offerings of a pool marked unavailable after a capacity or quota failure (services/pools/offering-marks.ts), shared by every server process. */
export class Migration20261128100000_pool_offering_unavailable extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "pool_offering_unavailable" ("pool_id" int not null, "offering_key" text not null, "until" timestamptz not null, "reason" text not null, constraint "pool_offering_unavailable_pkey" primary key ("pool_id", "offering_key"));`,
    );
    this.addSql(
      `alter table "pool_offering_unavailable" add constraint "pool_offering_unavailable_pool_id_foreign" foreign key ("pool_id") references "worker_pool" ("id") on update cascade on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "pool_offering_unavailable" cascade;`);
  }
}
