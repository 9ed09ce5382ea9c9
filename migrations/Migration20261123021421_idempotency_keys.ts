import { Migration } from '@mikro-orm/migrations';

/** Idempotency keys of creates (services/idempotency.ts), one per user and key, kept a day by default. */
export class Migration20261123021421_idempotency_keys extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "idempotency_key" ("id" serial primary key, "user_id" int not null, "key" varchar(200) not null, "operation" varchar(50) not null, "input_hash" varchar(64) not null, "result_id" int not null, "sealed_secret" text null, "created_at" timestamptz not null);`,
    );
    this.addSql(`create index "idempotency_key_created_at_index" on "idempotency_key" ("created_at");`);
    this.addSql(
      `alter table "idempotency_key" add constraint "idempotency_key_user_id_key_unique" unique ("user_id", "key");`,
    );

    this.addSql(
      `alter table "idempotency_key" add constraint "idempotency_key_user_id_foreign" foreign key ("user_id") references "app_user" ("id") on update cascade on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "idempotency_key" cascade;`);
  }
}
