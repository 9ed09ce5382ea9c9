import { Migration } from '@mikro-orm/migrations';

/**
 * Job output (DESIGN §13): the handler's exit code on the request, and its output as chunk rows with
 * one small state row per request (src/services/job-output.ts).
 */
export class Migration20261123014552_job_output extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "work_request_log_chunk" ("work_request_id" int not null, "start" bigint not null, "bytes" int not null, "data" text not null, constraint "work_request_log_chunk_pkey" primary key ("work_request_id", "start"));`,
    );
    this.addSql(
      `create table "work_request_log" ("work_request_id" int not null, "run_started_at" timestamptz null, "agent_offset" bigint not null default 0, "total_bytes" bigint not null default 0, "head_bytes" bigint not null default 0, "tail_start" bigint not null default 0, "updated_at" timestamptz not null default now(), constraint "work_request_log_pkey" primary key ("work_request_id"));`,
    );
    this.addSql(
      `alter table "work_request_log_chunk" add constraint "work_request_log_chunk_work_request_id_foreign" foreign key ("work_request_id") references "work_request" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "work_request_log" add constraint "work_request_log_work_request_id_foreign" foreign key ("work_request_id") references "work_request" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(`alter table "work_request" add column "exit_code" int null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "work_request_log_chunk" cascade;`);
    this.addSql(`drop table if exists "work_request_log" cascade;`);
    this.addSql(`alter table "work_request" drop column "exit_code";`);
  }
}
