import { Migration } from '@mikro-orm/migrations';

/**
 * Instances (DESIGN §11): each machine a pool starts, with its state, the provider's id and error
 * and its timestamps; and each pool's launch health (failures in a row, the backoff, the last error).
 */
export class Migration20261123031000_instances extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "instance" ("id" serial primary key, "name" varchar(150) not null, "pool_id" int not null, "provider_id" varchar(300) null, "worker_id" int null, "state" text check ("state" in ('LAUNCHING', 'RUNNING', 'STOPPING', 'TERMINATED', 'FAILED')) not null default 'LAUNCHING', "error" text null, "requested_at" timestamptz not null, "started_at" timestamptz null, "stopping_at" timestamptz null, "terminate_requested_at" timestamptz null, "terminated_at" timestamptz null);`,
    );
    this.addSql(`alter table "instance" add constraint "instance_name_unique" unique ("name");`);
    this.addSql(`create index "instance_pool_id_index" on "instance" ("pool_id");`);
    this.addSql(`create index "instance_worker_id_index" on "instance" ("worker_id");`);

    this.addSql(
      `alter table "instance" add constraint "instance_pool_id_foreign" foreign key ("pool_id") references "worker_pool" ("id") on update cascade;`,
    );
    this.addSql(
      `alter table "instance" add constraint "instance_worker_id_foreign" foreign key ("worker_id") references "worker" ("id") on update cascade on delete set null;`,
    );

    this.addSql(
      `alter table "worker_pool" add column "launch_failures" int not null default 0, add column "launch_retry_at" timestamptz null, add column "last_error" text null, add column "last_error_kind" varchar(20) null, add column "last_error_at" timestamptz null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "instance" cascade;`);

    this.addSql(
      `alter table "worker_pool" drop column "launch_failures", drop column "launch_retry_at", drop column "last_error", drop column "last_error_kind", drop column "last_error_at";`,
    );
  }
}
