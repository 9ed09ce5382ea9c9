import { Migration } from '@mikro-orm/migrations';

export class Migration20261121085131_scheduler extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "significant_tag" ("tag" text not null, "created_at" timestamptz not null, constraint "significant_tag_pkey" primary key ("tag"));`,
    );

    this.addSql(
      `create table "task_class" ("id" serial primary key, "key" text not null, "required_tags" text[] not null default '{}', "significant_provided_tags" text[] not null default '{}', "created_at" timestamptz not null);`,
    );
    this.addSql(`alter table "task_class" add constraint "task_class_key_unique" unique ("key");`);

    this.addSql(`alter table "work_request" add column "class_id" int null;`);
    this.addSql(
      `create index "work_request_pending_class_order" on "work_request" ("class_id", ("priority_base" + "priority_adjustment") desc, "created_at", "id") where "status" = 'PENDING';`,
    );
    this.addSql(
      `create index "work_request_active_worker" on "work_request" ("worker_id") where "status" in ('ASSIGNED', 'RUNNING');`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "significant_tag" cascade;`);

    this.addSql(`drop table if exists "task_class" cascade;`);

    this.addSql(`drop index "work_request_pending_class_order";`);
    this.addSql(`drop index "work_request_active_worker";`);
    this.addSql(`alter table "work_request" drop column "class_id";`);
  }
}
