import { Migration } from '@mikro-orm/migrations';

/**
 * A version of each worker's shape (name, type, pool, concurrency, tags, registration), raised by
 * PostgreSQL itself whenever one of those changes, whoever changes it: a server process keeps the
 * shapes of all workers and re-reads only those whose version moved. Heartbeats and connections do
 * not raise it.
 */
export class Migration20261121121500_worker_shape extends Migration {
  override async up(): Promise<void> {
    this.addSql(`create sequence if not exists "worker_shape_seq";`);
    this.addSql(`alter table "worker" add column "shape_version" bigint not null default 0;`);
    this.addSql(`update "worker" set "shape_version" = nextval('worker_shape_seq');`);
    this.addSql(`create or replace function "worker_shape_changed"() returns trigger language plpgsql as $$
      begin
        new.shape_version := nextval('worker_shape_seq');
        return new;
      end
    $$;`);
    this.addSql(
      `create trigger "worker_shape_new" before insert on "worker" for each row execute function "worker_shape_changed"();`,
    );
    this.addSql(`create trigger "worker_shape_changed" before update on "worker" for each row when (
         old.name is distinct from new.name or old.type is distinct from new.type or old.pool_id is distinct from new.pool_id
      or old.concurrency is distinct from new.concurrency or old.provided_tags is distinct from new.provided_tags
      or old.required_tags is distinct from new.required_tags or old.registered_at is distinct from new.registered_at
      or old.instance_created_at is distinct from new.instance_created_at)
      execute function "worker_shape_changed"();`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop trigger if exists "worker_shape_changed" on "worker";`);
    this.addSql(`drop trigger if exists "worker_shape_new" on "worker";`);
    this.addSql(`drop function if exists "worker_shape_changed"();`);
    this.addSql(`alter table "worker" drop column "shape_version";`);
    this.addSql(`drop sequence if exists "worker_shape_seq";`);
  }
}
