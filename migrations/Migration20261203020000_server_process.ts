import { Migration } from '@mikro-orm/migrations';

/**
 * The process registry (services/processes/registry.ts): one row per server process name, with its host,
 * pid, start and heartbeat, and when it stopped cleanly. A worker's `connected_process_id` names the process
 * that holds its WebSocket (null: none, or a worker that only calls over HTTP); deleting a registry row
 * leaves its workers unowned. A previous release, which knows neither, writes no owner and runs on.
 */
export class Migration20261203020000_server_process extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "server_process" ("id" serial primary key, "name" text not null, "host" text not null, "pid" int not null, "started_at" timestamptz not null, "heartbeat_at" timestamptz not null, "stopped_at" timestamptz null, constraint "server_process_name_unique" unique ("name"));`,
    );
    this.addSql(`alter table "worker" add column "connected_process_id" int null;`);
    this.addSql(
      `alter table "worker" add constraint "worker_connected_process_id_foreign" foreign key ("connected_process_id") references "server_process" ("id") on delete set null;`,
    );
    // The take-over finds a process's workers, and a deleted row's references are cleared, through it.
    this.addSql(
      `create index "worker_connected_process" on "worker" ("connected_process_id") where "connected_process_id" is not null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop index if exists "worker_connected_process";`);
    this.addSql(`alter table "worker" drop constraint if exists "worker_connected_process_id_foreign";`);
    this.addSql(`alter table "worker" drop column if exists "connected_process_id";`);
    this.addSql(`drop table if exists "server_process";`);
  }
}
