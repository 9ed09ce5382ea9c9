import { Migration } from '@mikro-orm/migrations';

export class Migration20261121083623_init extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "environment" ("id" serial primary key, "codename" varchar(100) not null, "architecture" varchar(50) not null, "variant" varchar(100) null, "backend" varchar(50) null, "image_format" varchar(50) null, "created_at" timestamptz not null);`,
    );

    this.addSql(
      `create table "scope" ("id" serial primary key, "name" varchar(100) not null, "created_at" timestamptz not null);`,
    );
    this.addSql(`alter table "scope" add constraint "scope_name_unique" unique ("name");`);

    this.addSql(
      `create table "app_user" ("id" serial primary key, "username" varchar(150) not null, "is_admin" boolean not null default false, "created_at" timestamptz not null);`,
    );
    this.addSql(`alter table "app_user" add constraint "app_user_username_unique" unique ("username");`);

    this.addSql(
      `create table "worker_pool" ("id" serial primary key, "name" varchar(100) not null, "provider_type" varchar(50) not null, "provider_account_encrypted" text null, "specifications" jsonb not null default '{}', "provided_tags" text[] not null default '{}', "required_tags" text[] not null default '{}', "max_active_instances" int not null default 10, "min_idle_instances" int not null default 0, "idle_timeout_seconds" int not null default 600, "target_latency_seconds" int not null default 600, "monthly_runtime_budget_seconds" int null, "enabled" boolean not null default true, "created_at" timestamptz not null);`,
    );
    this.addSql(`alter table "worker_pool" add constraint "worker_pool_name_unique" unique ("name");`);

    this.addSql(
      `create table "worker" ("id" serial primary key, "name" varchar(150) not null, "type" text check ("type" in ('worker', 'server', 'signing', 'not-assignable')) not null default 'worker', "pool_id" int null, "static_metadata" jsonb not null default '{}', "dynamic_metadata" jsonb not null default '{}', "concurrency" int not null default 1, "enabled" boolean not null default true, "draining" boolean not null default false, "connected_at" timestamptz null, "last_seen_at" timestamptz null, "registered_at" timestamptz not null, "instance_created_at" timestamptz null, "terminated_at" timestamptz null, "provided_tags" text[] not null default '{}', "required_tags" text[] not null default '{}', "provided_entries" jsonb not null default '[]', "required_entries" jsonb not null default '[]', "rejected_tags" jsonb not null default '[]');`,
    );
    this.addSql(`alter table "worker" add constraint "worker_name_unique" unique ("name");`);
    this.addSql(`create index "worker_pool_id_index" on "worker" ("pool_id");`);

    this.addSql(
      `create table "token" ("id" serial primary key, "hash" varchar(64) not null, "kind" text check ("kind" in ('admin', 'user', 'worker', 'activation')) not null, "label" varchar(200) not null default '', "user_id" int null, "worker_id" int null, "pool_id" int null, "enabled" boolean not null default true, "created_at" timestamptz not null, "used_at" timestamptz null);`,
    );
    this.addSql(`alter table "token" add constraint "token_hash_unique" unique ("hash");`);

    this.addSql(
      `create table "workspace" ("id" serial primary key, "scope_id" int not null, "name" varchar(100) not null, "is_public" boolean not null default true, "providable_tag_prefixes" text[] not null default '{}', "created_at" timestamptz not null);`,
    );
    this.addSql(`alter table "workspace" add constraint "workspace_scope_id_name_unique" unique ("scope_id", "name");`);

    this.addSql(
      `create table "work_request" ("id" serial primary key, "workspace_id" int not null, "created_by_id" int not null, "task_type" varchar(20) not null, "task_name" varchar(100) not null, "task_data" jsonb not null, "status" text check ("status" in ('BLOCKED', 'PENDING', 'ASSIGNED', 'RUNNING', 'COMPLETED', 'ABORTED')) not null default 'BLOCKED', "result" text check ("result" in ('SUCCESS', 'FAILURE', 'ERROR', 'SKIPPED')) null, "status_reason" text null, "priority_base" int not null default 0, "priority_adjustment" int not null default 0, "worker_id" int null, "user_provided_tags" text[] not null default '{}', "user_required_tags" text[] not null default '{}', "provided_tags" text[] not null default '{}', "required_tags" text[] not null default '{}', "provided_entries" jsonb not null default '[]', "required_entries" jsonb not null default '[]', "dropped_tags" jsonb not null default '[]', "retry_count" int not null default 0, "created_at" timestamptz not null, "pending_at" timestamptz null, "assigned_at" timestamptz null, "started_at" timestamptz null, "completed_at" timestamptz null);`,
    );
    this.addSql(`create index "work_request_workspace_id_index" on "work_request" ("workspace_id");`);
    this.addSql(`create index "work_request_status_index" on "work_request" ("status");`);
    this.addSql(`create index "work_request_worker_id_index" on "work_request" ("worker_id");`);
    this.addSql(
      `create index "work_request_provided_tags_gin" on "work_request" using gin ("provided_tags") with (fastupdate = off);`,
    );
    this.addSql(
      `create index "work_request_required_tags_gin" on "work_request" using gin ("required_tags") with (fastupdate = off);`,
    );
    this.addSql(
      `create index "work_request_pending_order" on "work_request" (("priority_base" + "priority_adjustment") desc, "created_at", "id") where "status" = 'PENDING';`,
    );

    this.addSql(
      `create table "work_request_dependency" ("work_request_id" int not null, "depends_on_id" int not null, constraint "work_request_dependency_pkey" primary key ("work_request_id", "depends_on_id"));`,
    );

    this.addSql(
      `create table "task_rule" ("id" serial primary key, "workspace_id" int null, "name" varchar(100) not null, "task_name" varchar(100) null, "expression" text null, "provided_tags" text[] not null default '{}', "required_tags" text[] not null default '{}', "created_at" timestamptz not null);`,
    );
    this.addSql(
      `create unique index "task_rule_site_name_unique" on "task_rule" ("name") where "workspace_id" is null;`,
    );
    this.addSql(
      `alter table "task_rule" add constraint "task_rule_workspace_id_name_unique" unique ("workspace_id", "name");`,
    );

    this.addSql(
      `create table "user_group" ("id" serial primary key, "scope_id" int not null, "workspace_id" int null, "name" varchar(100) not null);`,
    );
    this.addSql(
      `create unique index "user_group_scope_name_unique" on "user_group" ("scope_id", "name") where "workspace_id" is null;`,
    );
    this.addSql(
      `alter table "user_group" add constraint "user_group_scope_id_workspace_id_name_unique" unique ("scope_id", "workspace_id", "name");`,
    );

    this.addSql(
      `create table "user_group_member" ("group_id" int not null, "user_id" int not null, constraint "user_group_member_pkey" primary key ("group_id", "user_id"));`,
    );

    this.addSql(
      `create table "workspace_member" ("id" serial primary key, "workspace_id" int not null, "user_id" int not null, "role" text check ("role" in ('owner', 'contributor', 'viewer')) not null default 'contributor');`,
    );
    this.addSql(
      `alter table "workspace_member" add constraint "workspace_member_workspace_id_user_id_unique" unique ("workspace_id", "user_id");`,
    );

    this.addSql(
      `alter table "worker" add constraint "worker_pool_id_foreign" foreign key ("pool_id") references "worker_pool" ("id") on update cascade on delete set null;`,
    );

    this.addSql(
      `alter table "token" add constraint "token_user_id_foreign" foreign key ("user_id") references "app_user" ("id") on update cascade on delete set null;`,
    );
    this.addSql(
      `alter table "token" add constraint "token_worker_id_foreign" foreign key ("worker_id") references "worker" ("id") on update cascade on delete set null;`,
    );
    this.addSql(
      `alter table "token" add constraint "token_pool_id_foreign" foreign key ("pool_id") references "worker_pool" ("id") on update cascade on delete set null;`,
    );

    this.addSql(
      `alter table "workspace" add constraint "workspace_scope_id_foreign" foreign key ("scope_id") references "scope" ("id") on update cascade;`,
    );

    this.addSql(
      `alter table "work_request" add constraint "work_request_workspace_id_foreign" foreign key ("workspace_id") references "workspace" ("id") on update cascade;`,
    );
    this.addSql(
      `alter table "work_request" add constraint "work_request_created_by_id_foreign" foreign key ("created_by_id") references "app_user" ("id") on update cascade;`,
    );
    this.addSql(
      `alter table "work_request" add constraint "work_request_worker_id_foreign" foreign key ("worker_id") references "worker" ("id") on update cascade on delete set null;`,
    );

    this.addSql(
      `alter table "work_request_dependency" add constraint "work_request_dependency_work_request_id_foreign" foreign key ("work_request_id") references "work_request" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "work_request_dependency" add constraint "work_request_dependency_depends_on_id_foreign" foreign key ("depends_on_id") references "work_request" ("id") on update cascade on delete cascade;`,
    );

    this.addSql(
      `alter table "task_rule" add constraint "task_rule_workspace_id_foreign" foreign key ("workspace_id") references "workspace" ("id") on update cascade on delete set null;`,
    );

    this.addSql(
      `alter table "user_group" add constraint "user_group_scope_id_foreign" foreign key ("scope_id") references "scope" ("id") on update cascade;`,
    );
    this.addSql(
      `alter table "user_group" add constraint "user_group_workspace_id_foreign" foreign key ("workspace_id") references "workspace" ("id") on update cascade on delete set null;`,
    );

    this.addSql(
      `alter table "user_group_member" add constraint "user_group_member_group_id_foreign" foreign key ("group_id") references "user_group" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "user_group_member" add constraint "user_group_member_user_id_foreign" foreign key ("user_id") references "app_user" ("id") on update cascade on delete cascade;`,
    );

    this.addSql(
      `alter table "workspace_member" add constraint "workspace_member_workspace_id_foreign" foreign key ("workspace_id") references "workspace" ("id") on update cascade;`,
    );
    this.addSql(
      `alter table "workspace_member" add constraint "workspace_member_user_id_foreign" foreign key ("user_id") references "app_user" ("id") on update cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "workspace" drop constraint "workspace_scope_id_foreign";`);

    this.addSql(`alter table "user_group" drop constraint "user_group_scope_id_foreign";`);

    this.addSql(`alter table "token" drop constraint "token_user_id_foreign";`);

    this.addSql(`alter table "work_request" drop constraint "work_request_created_by_id_foreign";`);

    this.addSql(`alter table "user_group_member" drop constraint "user_group_member_user_id_foreign";`);

    this.addSql(`alter table "workspace_member" drop constraint "workspace_member_user_id_foreign";`);

    this.addSql(`alter table "worker" drop constraint "worker_pool_id_foreign";`);

    this.addSql(`alter table "token" drop constraint "token_pool_id_foreign";`);

    this.addSql(`alter table "token" drop constraint "token_worker_id_foreign";`);

    this.addSql(`alter table "work_request" drop constraint "work_request_worker_id_foreign";`);

    this.addSql(`alter table "work_request" drop constraint "work_request_workspace_id_foreign";`);

    this.addSql(`alter table "task_rule" drop constraint "task_rule_workspace_id_foreign";`);

    this.addSql(`alter table "user_group" drop constraint "user_group_workspace_id_foreign";`);

    this.addSql(`alter table "workspace_member" drop constraint "workspace_member_workspace_id_foreign";`);

    this.addSql(
      `alter table "work_request_dependency" drop constraint "work_request_dependency_work_request_id_foreign";`,
    );

    this.addSql(
      `alter table "work_request_dependency" drop constraint "work_request_dependency_depends_on_id_foreign";`,
    );

    this.addSql(`alter table "user_group_member" drop constraint "user_group_member_group_id_foreign";`);

    this.addSql(`drop table if exists "environment" cascade;`);

    this.addSql(`drop table if exists "scope" cascade;`);

    this.addSql(`drop table if exists "app_user" cascade;`);

    this.addSql(`drop table if exists "worker_pool" cascade;`);

    this.addSql(`drop table if exists "worker" cascade;`);

    this.addSql(`drop table if exists "token" cascade;`);

    this.addSql(`drop table if exists "workspace" cascade;`);

    this.addSql(`drop table if exists "work_request" cascade;`);

    this.addSql(`drop table if exists "work_request_dependency" cascade;`);

    this.addSql(`drop table if exists "task_rule" cascade;`);

    this.addSql(`drop table if exists "user_group" cascade;`);

    this.addSql(`drop table if exists "user_group_member" cascade;`);

    this.addSql(`drop table if exists "workspace_member" cascade;`);
  }
}
